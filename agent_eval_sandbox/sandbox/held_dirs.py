"""Directories the controller makes for its sandboxes, each held by a lock for as long as it lives.

A run stages the project, binds its sockets and its sandboxes' lifelines in
directories of its own under the shared root (the temp directory on the
daemon's host). It removes them on every exit it sees, Ctrl-C and SIGTERM
included; a controller killed with SIGKILL, or its machine's power, sees no
exit, and they stay.

Each such directory `D` has a sibling `D.lock` on which its maker holds an
exclusive `flock` until it removes `D`. The kernel drops the lock with the
last descriptor of its holder, however that process ended, so a lock anyone can
take again marks `D` as abandoned: `sweep_abandoned` removes it. Pids and
hostnames are not consulted, so this holds across pid namespaces too (a
controller in a container sharing the directory with one on the host).

The race between a maker that has made `D.lock` but not yet locked it and a
sweeper is closed from the maker's side: a sweeper unlinks the lock file
before it removes `D` and releases it only after, and a maker that finds its
lock file unlinked once it holds the lock starts over with a new name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

LOCK_SUFFIX = ".lock"
# Only names this tool makes are swept: its directories all start so.
NAME_PREFIX = "aes"
_ATTEMPTS = 100
# Why `sweep_abandoned` removed a directory, as run and gc report it.
ABANDONED = "the process that made it is gone"


class HeldDir:
    """A fresh private directory under `base`, held until `release()` removes it (idempotent)."""

    def __init__(self, base: Path, prefix: str) -> None:
        if not prefix.startswith(NAME_PREFIX):
            raise ValueError(f"a held directory's prefix starts with {NAME_PREFIX!r}: {prefix!r}")
        for _ in range(_ATTEMPTS):
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
            fd = _lock_for(path)
            if fd is not None:
                self.path = path
                self._fd: int | None = fd
                return
        raise OSError(f"could not make a held directory in {base}: every attempt was swept or taken")

    @property
    def lock_path(self) -> Path:
        return lock_path_of(self.path)

    def release(self) -> None:
        """Remove the directory, then its lock: a sweeper that takes the lock after this finds nothing."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            shutil.rmtree(self.path, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                self.lock_path.unlink()
        finally:
            os.close(fd)


def lock_path_of(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def _lock_for(path: Path) -> int | None:
    """Hold `path`'s lock; None (and `path` removed if still there) when a sweeper got to it first."""
    try:
        fd = os.open(lock_path_of(path), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:  # a stale lock of an earlier directory of that name: take another name
        shutil.rmtree(path, ignore_errors=True)
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)  # waits out a sweeper that took it first
    if os.fstat(fd).st_nlink == 0:  # that sweeper unlinked it, and removed `path` (or will have, once it let go)
        os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        return None
    return fd


def sweep_abandoned(bases: Iterable[Path]) -> list[Path]:
    """Remove this user's held directories under `bases` whose maker is gone; return them.

    Only a directory of this tool's naming, owned by this user, whose lock file is
    a regular file of this user nobody holds, is removed, and never through a
    symlink: a shared temp directory holds other users' names too.
    """
    removed: list[Path] = []
    seen: set[Path] = set()
    for base in bases:
        try:
            real = base.resolve()
        except OSError:
            continue
        if real in seen:
            continue
        seen.add(real)
        try:
            entries = [e for e in os.scandir(base) if e.name.startswith(NAME_PREFIX) and e.name.endswith(LOCK_SUFFIX)]
        except OSError:
            continue
        for entry in entries:
            path = Path(base) / entry.name[: -len(LOCK_SUFFIX)]
            if _sweep_one(path):
                removed.append(path)
    return removed


def _sweep_one(path: Path) -> bool:
    lock = lock_path_of(path)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False  # gone meanwhile, another user's, or a symlink
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its maker lives
        if os.fstat(fd).st_nlink == 0:
            return False  # released or swept meanwhile
        # Unlinked first: a maker that has just made this lock finds it unlinked and starts over.
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        try:
            held = os.lstat(path)
        except FileNotFoundError:
            return True  # its maker had removed the directory and died before its lock
        if stat.S_ISDIR(held.st_mode) and held.st_uid == os.geteuid():
            shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)
