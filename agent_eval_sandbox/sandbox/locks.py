"""Cross-process locks for image work: parallel runs must not build the same image twice."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

from agent_eval_sandbox.sandbox.claude_binary import cache_root


@contextmanager
def host_lock(name: str) -> Iterator[None]:
    path = cache_root() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
