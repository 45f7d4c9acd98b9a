"""Leave nothing behind: remove a run's sandboxes on SIGINT/SIGTERM and on any exit.

The removal happens inside the signal handler, before the exception unwinds:
worker threads blocked in a sandbox's `exec` only return once its container is
gone, so waiting for them first (a thread pool's shutdown does) would hold
Ctrl-C until every case's deadline.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from agent_eval_sandbox.sandbox.base import RemovedObject, SandboxBackend

log = logging.getLogger(__name__)

HANDLED = (signal.SIGINT, signal.SIGTERM)


def _destroy_quietly(backend: SandboxBackend, run_id: str) -> None:
    try:
        removed = backend.destroy_run(run_id)
    except Exception as exc:  # noqa: BLE001 - the signal must still end the run
        log.warning("could not remove the sandboxes of run %s: %s (`agent-eval-sandbox gc` will)", run_id, exc)
    else:
        if removed:  # after a run that ended by itself the pool has removed everything: nothing to say
            log.info("removed what was left of run %s: %s", run_id, _count_by_kind(removed))


def _count_by_kind(removed: list[RemovedObject]) -> str:
    counts = Counter(obj.kind for obj in removed)
    return ", ".join(f"{n} {kind}{'' if n == 1 else 's'}" for kind, n in sorted(counts.items()))


@contextmanager
def run_scope(backend: SandboxBackend, run_id: str, cancelled: threading.Event | None = None) -> Iterator[None]:
    """Own every sandbox object of `run_id` for the duration of the block.

    On a signal, `cancelled` is set first — before the removal, so that no case
    starts in the meantime on a worker the removal just freed.
    On SIGINT: remove them, then raise KeyboardInterrupt (the CLI exits 130).
    On SIGTERM: remove them, then raise SystemExit(143).
    On leaving the block in any way: remove whatever is left.
    Signal handlers can only be set from the main thread; elsewhere only the
    removal on exit applies.
    """
    # What signal.getsignal returns: a callable, SIG_DFL/SIG_IGN, or None (a handler not set from Python).
    previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        previous.clear()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        for sig in HANDLED:  # a second Ctrl-C must not interrupt the removal
            signal.signal(sig, signal.SIG_IGN)
        if cancelled is not None:
            cancelled.set()
        _destroy_quietly(backend, run_id)
        restore()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        for sig in HANDLED:
            previous[sig] = signal.getsignal(sig)
            signal.signal(sig, on_signal)
    try:
        yield
    finally:
        restore()
        _destroy_quietly(backend, run_id)
