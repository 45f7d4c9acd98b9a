"""Host directories the controller makes, each held by a lock for as long as it lives.

A run stages the project, binds its sockets and writes its sandboxes' /etc/hosts in
directories of its own under the shared root (the temp directory on the
daemon's host), and uses a few short-lived ones in the temp directory. It
removes them on every exit it sees, Ctrl-C and SIGTERM included; a controller
killed with SIGKILL, or its machine's power, sees no exit, and they stay.

Each such entry `E` (a directory, or the short alias symlink of host_paths) has
a sibling `E.lock` on which its maker holds an exclusive `flock` from before `E`
exists until after `E` is gone. The kernel drops the lock with the last
descriptor of its holder, however that process ended, so a lock anyone can take
again marks `E` as abandoned, and `sweep_abandoned` removes it. Pids and
hostnames are not consulted, so this holds across pid namespaces too.

What is swept is only what this tool provably made: a name of its shape whose
lock file is this user's and holds `LOCK_MARK`, which the maker writes once it
holds the lock. An unmarked lock is never swept, so a sweeper can never take a
lock its maker is about to take. Where it can, the maker makes the lock without a
name (O_TMPFILE), holds it, marks it, syncs it and only then links it in, so no
kill and no power cut leaves an unmarked one behind. Where it cannot (a file system
without unnamed files, no /proc of its own), it makes the lock under its name
first, and a kill in the microseconds before the mark leaves an empty lock that
stays. A sweeper removes the entry before the lock: one interrupted half-way
leaves a marked lock for the next sweep.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

LOCK_SUFFIX = ".lock"
LOCK_MARK = b"agent-eval-sandbox: held by the process that made the entry beside it\n"
# The names this tool gives its held entries: a prefix of its own and 8 random hex digits (as long as
# mkdtemp's suffix: socket paths under them have a byte budget, see host_paths).
_NAME = re.compile(r"aes[a-z]*-(?:[a-z]+-)*[0-9a-f]{8}")
_ATTEMPTS = 100
# Why `sweep_abandoned` removed an entry, as run and gc report it.
ABANDONED = "the process that made it is gone"


def lock_path_of(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


class _Held:
    """An entry made under `base` while its lock is held; `release()` removes both (idempotent)."""

    def __init__(self, base: Path, prefix: str) -> None:
        if not _NAME.fullmatch(prefix + "0" * 8):
            raise ValueError(f"a held entry's prefix is 'aes' and lowercase words, each ending in '-': {prefix!r}")
        for _ in range(_ATTEMPTS):
            path = base / f"{prefix}{secrets.token_hex(4)}"
            fd = _claim(path)
            if fd is None:
                continue
            try:
                self._make(path)
            except FileExistsError:  # a name someone else made without a lock: take another
                _drop_claim(path, fd)
                continue
            except BaseException:
                _drop_claim(path, fd)
                raise
            self.path = path
            self._fd: int | None = fd
            return
        raise OSError(f"could not make a held entry {prefix}* in {base}: every name tried was taken")

    def _make(self, path: Path) -> None:
        raise NotImplementedError

    def release(self) -> None:
        """Remove the entry, then its lock: a sweeper that takes the lock after this finds nothing."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            os.close(fd)  # the base is gone: so is the entry
            return
        try:
            _remove_entry(self.path.name, dir_fd)
            if _own_kind(self.path.name, dir_fd) is not None:
                os.close(fd)  # left marked and free: a later sweep finishes the removal
                return
        finally:
            os.close(dir_fd)
        _drop_claim(self.path, fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class HeldDir(_Held):
    """A fresh private (0700) directory under `base`, held until released."""

    def _make(self, path: Path) -> None:
        path.mkdir(mode=0o700)


class HeldSymlink(_Held):
    """A fresh symlink under `base` to `target`, held until released."""

    def __init__(self, base: Path, prefix: str, target: Path) -> None:
        self._target = target
        super().__init__(base, prefix)

    def _make(self, path: Path) -> None:
        os.symlink(self._target, path)  # fails on an existing name: a sticky /tmp keeps ours ours


def _claim(path: Path) -> int | None:
    """`path`'s lock, new, held and marked; None when the name is taken."""
    try:
        fd = _claim_unnamed(path)
        return fd if fd is not None else _claim_named(path)
    except FileExistsError:
        return None


def _claim_unnamed(path: Path) -> int | None:
    """The lock made without a name, held and marked, then linked in as `path`'s: a maker killed at any
    point leaves either nothing or a marked lock, never the empty file a sweep must keep. None where the
    file system or the platform cannot (the caller falls back to `_claim_named`)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        fd = os.open(path.parent, flag | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:
        return None  # EOPNOTSUPP, or EISDIR on kernels before 3.11
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write_mark(fd)
        # On the disk the mark must come before the name: after a power cut ext4 can hold the link and
        # not yet the data, an empty lock no sweep takes (red team round 10, B1). A no-op on tmpfs.
        os.fsync(fd)
        # linkat(AT_SYMLINK_FOLLOW) of /proc's link to it (linkat's AT_EMPTY_PATH needs
        # CAP_DAC_READ_SEARCH on older kernels, and Python's os.link has no such flag); a src_dir_fd makes
        # os.link call linkat at all: without one it calls link(), which follows nothing.
        proc_fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.link(str(fd), lock_path_of(path), src_dir_fd=proc_fds, follow_symlinks=True)
        finally:
            os.close(proc_fds)
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError) and not isinstance(exc, FileExistsError):
            # No /proc, or another pid namespace's, or no descriptor left: nothing of this attempt has a name.
            return None
        raise
    return fd


def _claim_named(path: Path) -> int:
    """The lock made under its name, then held and marked: a maker killed in between leaves it empty
    (and unswept, as anyone's unmarked file). Raises FileExistsError when the name is taken."""
    fd = os.open(lock_path_of(path), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        # Nobody else takes an unmarked lock, so this does not wait.
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write_mark(fd)
    except BaseException:
        _drop_claim(path, fd)
        raise
    return fd


def _write_mark(fd: int) -> None:
    """The whole mark, or OSError: a part of it (a small `ulimit -f`, a full disk) is a lock no sweep
    would ever take (red team round 10, B3)."""
    if os.write(fd, LOCK_MARK) != len(LOCK_MARK):
        raise OSError(errno.EFBIG, "could not write a held entry's lock mark in full")


def _drop_claim(path: Path, fd: int) -> None:
    try:
        with contextlib.suppress(FileNotFoundError):
            lock_path_of(path).unlink()
    finally:
        os.close(fd)


def _remove_entry(name: str, dir_fd: int) -> str | None:
    """Remove this user's directory or symlink `name` in the directory `dir_fd`, never through a symlink;
    return the kind found there (`_own_kind`), None when there was nothing of ours."""
    kind = _own_kind(name, dir_fd)
    if kind == "dir":
        shutil.rmtree(name, ignore_errors=True, dir_fd=dir_fd)
    elif kind == "link":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
    return kind


def _own_kind(name: str, dir_fd: int) -> str | None:
    """"dir" or "link" when `name` is this user's entry of a kind this module makes; None for anything
    else there (someone else's, another kind) and for nothing."""
    try:
        found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if found.st_uid != os.geteuid():
        return None
    if stat.S_ISDIR(found.st_mode):
        return "dir"
    return "link" if stat.S_ISLNK(found.st_mode) else None


def sweep_abandoned(bases: Iterable[Path]) -> list[Path]:
    """Remove this user's held entries under `bases` whose maker is gone; return those removed.

    Each base is opened once and everything in it is done relative to that
    descriptor: a path through a directory someone else controls cannot send the
    lock check to one directory and the removal to another. Never raises for what
    it finds: a base that cannot be read, an entry that cannot be removed (its
    marked lock stays, for a later sweep) are passed over.
    """
    removed: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for base in bases:
        try:
            dir_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (OSError, ValueError):  # missing, unreadable, not a directory, a symlink loop
            continue
        try:
            info = os.fstat(dir_fd)
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(dir_fd) as listing:
                names = [e.name[: -len(LOCK_SUFFIX)] for e in listing if e.name.endswith(LOCK_SUFFIX)]
            removed += [base / name for name in names if _NAME.fullmatch(name) and _sweep_one(name, dir_fd)]
        except OSError:
            continue
        finally:
            os.close(dir_fd)
    return removed


def _sweep_one(name: str, dir_fd: int) -> bool:
    lock = name + LOCK_SUFFIX
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False  # gone meanwhile, another user's, or a symlink
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size != len(LOCK_MARK):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its maker lives (or the file system has no flock: keep it)
        if os.fstat(fd).st_nlink == 0 or os.pread(fd, len(LOCK_MARK) + 1, 0) != LOCK_MARK:
            return False  # released meanwhile, or not this tool's
        existed = _remove_entry(name, dir_fd) is not None
        if _own_kind(name, dir_fd) is not None:
            return False  # could not remove it all: the marked lock stays for a later sweep
        # Nothing of ours is left under the name (what may be there now is someone else's): the lock goes.
        with contextlib.suppress(OSError):
            os.unlink(lock, dir_fd=dir_fd)
        return existed
    except OSError:
        return False
    finally:
        os.close(fd)
