"""Where a case gets its sandbox: made ahead of it, removed behind it.

    pool = SandboxPool(backend, ahead=2, stop=cancelled)
    pool.plan("0003", make_spec)          # in the order the cases will ask
    box = pool.take("0003", make_spec)    # the case's own sandbox, made while earlier cases ran
    pool.release("0003", box)             # removed in the background; the case goes on
    pool.close()                          # what was made and never taken goes too

Creating a sandbox (volumes, container, start, lifeline) and removing one cost
more than a bare `docker run`; a case need not wait for either. The pool makes
the sandboxes of the next cases while earlier ones run, at most `ahead` made
and not yet taken, and removes finished ones on a thread of its own.

Isolation is the same as making the sandbox on demand:
- a sandbox is made for one key (one case, its labels and mounts fixed at
  creation from that case's spec) and handed out at most once: a second
  `take` of the same key, a retry, gets a new sandbox;
- the spec of a planned sandbox may mount per-case host directories, but the
  case's data goes into them only after it took its sandbox (the pool only
  calls `make_spec`, which must create them empty);
- what the pool made carries the run's labels and its lifeline like any
  other sandbox of the run: `run_scope`, the reaper and `gc` see it. `close()`
  waits for a creation in flight and removes it, so that nothing made after a
  teardown's sweep outlives the run.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from agent_eval_sandbox.sandbox.base import Sandbox, SandboxBackend, SandboxError, SandboxSpec

SpecFactory = Callable[[], SandboxSpec]

# Removals at once: each is mostly the daemon's work, and the cases run on the same CPUs.
REMOVERS = 2


class SandboxSource(ABC):
    """What a case asks for its sandbox, and gives it back to."""

    @abstractmethod
    def take(self, key: str, make_spec: SpecFactory) -> Sandbox:
        """A started, idle sandbox for `key`, never one handed out before."""

    @abstractmethod
    def release(self, key: str, sandbox: Sandbox | None) -> None:
        """The case of `key` is done with its sandbox (None: it never took one); remove it."""

    def stop_ahead(self) -> None:
        """No further case will start (e.g. `run -x` after a failure): make nothing more ahead."""
        return None


class DirectSandboxes(SandboxSource):
    """No pool: made when asked for, removed when given back (both while the case waits)."""

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

    def take(self, key: str, make_spec: SpecFactory) -> Sandbox:
        return self._backend.create(make_spec())

    def release(self, key: str, sandbox: Sandbox | None) -> None:
        if sandbox is not None:
            sandbox.destroy()


class SandboxPool(SandboxSource):
    """Sandboxes made ahead for planned keys, at most `ahead` made and not taken; removal in the background."""

    def __init__(self, backend: SandboxBackend, *, ahead: int, stop: threading.Event | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self._backend = backend
        self._ahead = max(0, ahead)
        # Set when the run is interrupted: nothing new is made from then on.
        self._stop = stop or threading.Event()
        self._warn = warn or (lambda _: None)
        self._lock = threading.Lock()
        self._planned: deque[tuple[str, SpecFactory]] = deque()
        self._ready: dict[str, Future[Sandbox]] = {}  # made (or being made) and not taken
        self._settled: set[str] = set()  # keys that took their sandbox or never will
        self._closed = False
        self._makers = ThreadPoolExecutor(max_workers=max(1, self._ahead), thread_name_prefix="sandbox-make")
        self._removers = ThreadPoolExecutor(max_workers=REMOVERS, thread_name_prefix="sandbox-remove")
        self._removals: set[Future[None]] = set()
        self._removed_all = False  # close() is past waiting for removals
        # Finished sandboxes waiting for removal, at most: past that, giving one back waits. What an
        # agent left running goes on until its sandbox is removed, so the backlog must stay short.
        self._backlog = threading.BoundedSemaphore(max(1, self._ahead) + REMOVERS)

    # ---- what the cases call ----------------------------------------------------------

    def plan(self, key: str, make_spec: SpecFactory) -> None:
        """`key` will ask for a sandbox, after the keys planned before it."""
        with self._lock:
            if key in self._settled or any(k == key for k, _ in self._planned) or key in self._ready:
                raise ValueError(f"sandbox key {key!r} is already planned")
            self._planned.append((key, make_spec))
            self._fill()

    def take(self, key: str, make_spec: SpecFactory) -> Sandbox:
        with self._lock:
            if self._closed:
                raise SandboxError("the run's sandboxes are being removed: no new case starts")
            made = self._ready.pop(key, None)
            self._settle(key)
            self._fill()
        if made is None:
            return self._backend.create(make_spec())
        return made.result()

    def release(self, key: str, sandbox: Sandbox | None) -> None:
        with self._lock:
            unused = self._ready.pop(key, None)
            self._settle(key)
            self._fill()
        if unused is not None:
            unused.cancel()  # not begun yet: never made; else removed once made
            unused.add_done_callback(self._remove_made)
        if sandbox is not None:
            self._remove(sandbox)

    def stop_ahead(self) -> None:
        """Make nothing more ahead; what is made stays for its key (taken, or given back unused)."""
        with self._lock:
            self._planned.clear()

    # ---- the run's end ----------------------------------------------------------------

    def close(self) -> None:
        """Make nothing more; remove every sandbox made and not taken, wait for every removal.

        Idempotent. Waits for a creation in flight: its container may appear
        after a teardown listed the run's objects, and must not outlive it.
        """
        with self._lock:
            self._closed = True
            self._planned.clear()
            unused = list(self._ready.values())
            self._ready.clear()
        for future in unused:
            if not future.cancel():
                self._remove_made(future)
        self._makers.shutdown(wait=True, cancel_futures=True)
        while True:
            with self._lock:
                pending = list(self._removals)
            if not pending:
                break
            for removal in pending:
                removal.exception()  # wait; failures were reported by the removal itself
        with self._lock:
            self._removed_all = True
        self._removers.shutdown(wait=True)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def waiting(self) -> int:
        """Sandboxes made (or being made) and not taken yet."""
        with self._lock:
            return len(self._ready)

    # ---- inside -----------------------------------------------------------------------

    def _settle(self, key: str) -> None:
        self._settled.add(key)
        if any(k == key for k, _ in self._planned):
            self._planned = deque((k, f) for k, f in self._planned if k != key)

    def _fill(self) -> None:
        """Start making the next planned sandboxes, up to `ahead` not taken (holding the lock)."""
        while self._planned and len(self._ready) < self._ahead and not self._closed and not self._stop.is_set():
            key, make_spec = self._planned.popleft()
            self._ready[key] = self._makers.submit(self._make, make_spec)

    def _make(self, make_spec: SpecFactory) -> Sandbox:
        if self._stop.is_set():
            raise SandboxError("the run was interrupted before this case's sandbox was made")
        return self._backend.create(make_spec())

    def _remove_made(self, future: Future[Sandbox]) -> None:
        if future.cancelled() or future.exception() is not None:
            return  # nothing was made (a failed create removes what it had made)
        self._remove(future.result())

    def _remove(self, sandbox: Sandbox) -> None:
        self._backlog.acquire()
        with self._lock:
            future = None if self._removed_all else self._removers.submit(self._destroy, sandbox)
            if future is not None:
                self._removals.add(future)
        if future is None:  # after close(): nothing waits for a background removal any more
            try:
                self._destroy(sandbox)
            finally:
                self._backlog.release()
        else:
            future.add_done_callback(self._removal_done)

    def _removal_done(self, future: Future[None]) -> None:
        with self._lock:
            self._removals.discard(future)
        self._backlog.release()

    def _destroy(self, sandbox: Sandbox) -> None:
        try:
            sandbox.destroy()
        except Exception as exc:  # noqa: BLE001 - the run's final teardown removes what is left
            self._warn(f"could not remove sandbox {sandbox.name}: {exc} (the run's teardown will)")
