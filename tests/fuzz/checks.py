"""What every fuzzer asserts: a clear error or a clean result, and no write outside."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from agent_eval_sandbox.errors import UserError

T = TypeVar("T")

Snapshot = dict[str, tuple[Any, ...]]


def outcome(call: Callable[[], T], expected: type[UserError] = UserError) -> T | UserError:
    """The call's result, or the clear error it raised: a `expected` with a one-line message.

    Any other exception propagates (and fails the test): a traceback for bad input.
    """
    try:
        return call()
    except UserError as exc:
        assert isinstance(exc, expected), f"{type(exc).__name__} is not a {expected.__name__}: {exc}"
        assert_one_line(exc.render())
        return exc


def assert_one_line(message: str) -> None:
    assert message.strip(), "an empty error message"
    assert len(message.splitlines()) == 1, f"not one line: {message!r}"
    assert "Traceback" not in message


def snapshot(root: Path, skip: Iterable[Path] = ()) -> Snapshot:
    """Every entry under `root` (links not followed) with its type, mode, size and content hash."""
    skipped = {str(p) for p in skip}
    found: Snapshot = {}
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(current, d) not in skipped]
        for name in dirs + files:
            path = os.path.join(current, name)
            if path in skipped:
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[path] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                found[path] = ("file", st.st_mode, st.st_size, hashlib.sha256(Path(path).read_bytes()).hexdigest())
            else:
                found[path] = ("other", st.st_mode)
    return found
