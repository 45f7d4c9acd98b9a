"""Tar streams between the host and a sandbox, handled as hostile input.

`extract_tar` unpacks what a sandbox hands back (the sandbox is untrusted):
absolute paths and `..` are refused, links are never followed, created or
written through (a hardlink to a file extracted earlier from the same archive
becomes a copy of it), device files and FIFOs are skipped, and every write is made
relative to an already-opened parent directory with O_NOFOLLOW, so a symlink
sitting in the destination cannot redirect it. Nothing named `.git` (file or
directory, at any depth) is extracted: a host `git` run over the copy would
execute what its config names (see `git_names`). Nothing deeper than `MAX_DEPTH`
levels is extracted either: the host's tools (Python's recursive `shutil.rmtree`
and `copytree` among them) must never meet a tree the agent made deep enough to
break them. `tar_from_dir` and
`tar_from_files` build what goes in, owned by the sandbox user.

No Docker here: the backend feeds these functions the archive streams.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO

from agent_eval_sandbox.errors import CopyOutInterrupted, UnsafeArchiveError
from agent_eval_sandbox.git_names import is_git_dir_name

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_CHUNK = 1024 * 1024
# Far deeper than any real project's tree, far below what recursive host code survives (~1000 frames).
MAX_DEPTH = 64


@dataclass(frozen=True)
class SkippedEntry:
    """A path a copy left out, and why."""

    path: str
    # "symlink" | "hardlink" | "device" | "fifo" | "socket" | "other" | "excluded" | "git" | "too_deep"
    # (and, for host staging, "denied" | "answer_key" | "outside": runner.workspace.StagingReport)
    kind: str
    detail: str = ""


@dataclass(frozen=True)
class CopyInReport:
    """What went into a sandbox: the archive `tar_from_dir` / `tar_from_files` built."""

    files: int
    bytes: int
    skipped: tuple[SkippedEntry, ...] = ()


@dataclass(frozen=True)
class CopyOutReport:
    """What came out of a sandbox (`extract_tar`); `found` is False when the source did not exist."""

    found: bool
    files: int = 0
    dirs: int = 0
    bytes: int = 0
    skipped: tuple[SkippedEntry, ...] = ()


def special_file_kind(mode: int) -> str:
    """The SkippedEntry kind of a file that is neither a directory, a regular file nor a symlink."""
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def safe_parts(name: str, strip_top: str | None = None) -> tuple[str, ...]:
    """The path components of a member name, or UnsafeArchiveError.

    `strip_top` is the directory name Docker puts at the top of an archive of a
    directory (`workspace/...` for /workspace); it is removed so the caller's
    destination receives the contents. An empty result means the top itself.
    """
    if name.startswith("/"):
        raise UnsafeArchiveError(f"archive member {name!r} has an absolute path; refused")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise UnsafeArchiveError(f"archive member {name!r} contains '..'; refused")
    if strip_top is not None:
        if not parts or parts[0] != strip_top:
            raise UnsafeArchiveError(
                f"archive member {name!r} is outside the expected top directory {strip_top + '/'!r}; refused"
            )
        parts = parts[1:]
    return parts


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    if member.ischr() or member.isblk():
        return "device"
    if member.isfifo():
        return "fifo"
    return "other"


class _Extractor:
    def __init__(self, dest: Path, *, max_bytes: int, max_files: int, stop: threading.Event | None) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        self.stop = stop
        self.root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.files = 0
        self.dirs = 0
        self.bytes = 0
        self.members = 0
        self.skipped: list[SkippedEntry] = []
        self.git_skipped: set[tuple[str, ...]] = set()
        self.deep_skipped: set[tuple[str, ...]] = set()
        self.written: set[tuple[str, ...]] = set()
        # Directory modes are applied last: a read-only directory must not stop
        # its own contents from being written.
        self.dir_modes: dict[tuple[str, ...], int] = {}

    def check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise CopyOutInterrupted(f"copy-out stopped after {self.members} entries: the run was interrupted")

    def close(self) -> None:
        os.close(self.root)

    def _open_dir(self, parts: tuple[str, ...], member: str, *, create: bool) -> int:
        """An fd of `parts` under the root, creating missing levels, never following a link."""
        fd = os.dup(self.root)
        try:
            for part in parts:
                try:
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o700, dir_fd=fd)
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafeArchiveError(
                            f"archive member {member!r}: {part!r} in the destination is a link or "
                            "not a directory; refused to write through it"
                        ) from None
                    raise
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _count(self, member: str) -> None:
        self.members += 1
        if self.members > self.max_files:
            raise UnsafeArchiveError(
                f"archive has more than {self.max_files} entries (at {member!r}); "
                "copy-out stopped, the destination holds a partial copy"
            )

    def add(self, tar: tarfile.TarFile, member: tarfile.TarInfo, parts: tuple[str, ...], strip_top: str | None) -> None:
        shown = "/".join(parts)
        self._count(member.name)
        git_at = next((i for i, part in enumerate(parts) if is_git_dir_name(part)), None)
        if git_at is not None:
            # Reported once per git dir, not once per object in it.
            top = parts[: git_at + 1]
            if top not in self.git_skipped:
                self.git_skipped.add(top)
                self.skipped.append(SkippedEntry("/".join(top), "git", "git metadata is never collected"))
            return
        if len(parts) > MAX_DEPTH:
            top = parts[:MAX_DEPTH]  # reported once per subtree cut off, not once per entry in it
            if top not in self.deep_skipped:
                self.deep_skipped.add(top)
                self.skipped.append(SkippedEntry("/".join(top), "too_deep",
                                                 f"what lies deeper than {MAX_DEPTH} levels is never collected"))
            return
        if member.isdir():
            os.close(self._open_dir(parts, member.name, create=True))
            self.dir_modes[parts] = (member.mode & 0o777) | 0o700
            self.dirs += 1
        elif member.isreg():
            self._check_size(member, member.size)
            self._write_file(member, parts, tar.extractfile(member))
            self.written.add(parts)
        elif member.islnk() and (target := self._extracted_target(member, strip_top)) is not None:
            self._copy_hardlink(member, parts, target)
        else:
            detail = member.linkname if (member.issym() or member.islnk()) else ""
            self.skipped.append(SkippedEntry(shown, _kind(member), detail))

    def _check_size(self, member: tarfile.TarInfo, size: int) -> None:
        if self.bytes + size > self.max_bytes:
            raise UnsafeArchiveError(
                f"archive exceeds the cap of {self.max_bytes} bytes (at {member.name!r}); "
                "copy-out stopped, the destination holds a partial copy"
            )

    def _extracted_target(self, member: tarfile.TarInfo, strip_top: str | None) -> tuple[str, ...] | None:
        """The parts of a hardlink's target if it is a regular file this extraction wrote."""
        try:
            target = safe_parts(member.linkname, strip_top)
        except UnsafeArchiveError:
            return None
        return target if target in self.written else None

    def _copy_hardlink(self, member: tarfile.TarInfo, parts: tuple[str, ...], target: tuple[str, ...]) -> None:
        # Docker archives the second name of a file as a hardlink to the first;
        # which name comes first is arbitrary, so both become regular files. The
        # content is read back from our own copy, never through a link.
        parent = self._open_dir(target[:-1], member.linkname, create=False)
        try:
            fd = os.open(target[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=parent)
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            self._check_size(member, size)
            original = tarfile.TarInfo(member.name)
            original.size, original.mode, original.mtime = size, member.mode, member.mtime
            self._write_file(original, parts, src)
        self.written.add(parts)

    def _write_file(self, member: tarfile.TarInfo, parts: tuple[str, ...], src: IO[bytes] | None) -> None:
        assert src is not None  # a regular member always has data
        parent = self._open_dir(parts[:-1], member.name, create=True)
        leaf = parts[-1]
        try:
            try:
                existing = os.stat(leaf, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None:
                if stat.S_ISDIR(existing.st_mode):
                    raise UnsafeArchiveError(f"archive member {member.name!r} would replace a directory; refused")
                # Unlink rather than truncate: a pre-existing hardlink or symlink
                # must not carry our write to another file.
                os.unlink(leaf, dir_fd=parent)
            fd = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=parent)
            with os.fdopen(fd, "wb") as out:
                remaining = member.size
                while remaining:
                    self.check_stop()  # one big file must not hold an interrupted run either
                    chunk = src.read(min(_CHUNK, remaining))
                    if not chunk:
                        raise UnsafeArchiveError(f"archive member {member.name!r} is truncated")
                    out.write(chunk)
                    remaining -= len(chunk)
                out.flush()
                os.fchmod(out.fileno(), (member.mode & 0o777) | 0o400)
                os.utime(out.fileno(), (member.mtime, member.mtime))
        finally:
            os.close(parent)
        self.bytes += member.size
        self.files += 1

    def finish(self) -> None:
        for parts, mode in sorted(self.dir_modes.items(), key=lambda kv: -len(kv[0])):
            if not parts:
                continue
            fd = self._open_dir(parts, "/".join(parts), create=False)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)


class _SourceError(Exception):
    """An error of the stream being read, kept apart from the destination's own."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class _SourceReader:
    """The archive stream, with its errors marked as the source's (tarfile only calls read)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except OSError as exc:
            raise _SourceError(exc) from exc


def extract_tar(
    stream: BinaryIO, dest: Path, *, strip_top: str | None, max_bytes: int, max_files: int,
    stop: threading.Event | None = None,
) -> CopyOutReport:
    """Safely unpack a tar stream into `dest` (created if missing); see the module doc.

    Once `stop` is set, raises CopyOutInterrupted at the next entry (the destination holds a partial copy)."""
    extractor = _Extractor(dest, max_bytes=max_bytes, max_files=max_files, stop=stop)
    try:
        try:
            # typeshed's tarfile stub asks every fileobj for write/tell/seek/close too, but the
            # stream modes ("r|") only ever call read: the stub is stricter than tarfile.
            with tarfile.open(fileobj=_SourceReader(stream), mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    extractor.check_stop()
                    parts = safe_parts(member.name, strip_top)
                    if not parts:  # the top directory itself: that is `dest`
                        continue
                    extractor.add(tar, member, parts, strip_top)
            extractor.finish()
        except tarfile.TarError as exc:
            raise UnsafeArchiveError(f"the archive is not a valid tar stream: {exc}") from exc
        except _SourceError as exc:
            raise exc.error from None  # the transport's error, for the caller's boundary to map
        except OSError as exc:
            # The destination refused a name or a write (too long, disk full): this copy
            # stops, the run goes on.
            where = f" at {exc.filename!r}" if exc.filename else ""
            raise UnsafeArchiveError(
                f"copy-out stopped{where}: {exc.strerror or exc}; the destination holds a partial copy"
            ) from exc
    finally:
        extractor.close()
    return CopyOutReport(
        found=True,
        files=extractor.files,
        dirs=extractor.dirs,
        bytes=extractor.bytes,
        skipped=tuple(extractor.skipped),
    )


class ChunkStream(io.RawIOBase):
    """A readable file over an iterator of byte chunks (Docker's archive stream)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        # Any writable buffer may come in; the view is released at once so it holds no export of it.
        with memoryview(buffer) as view:
            n = min(len(view), len(self._buf))
            view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


# ---- building archives for copy-in -------------------------------------------------


def _tarinfo(
    name: str, *, uid: int, gid: int, mode: int, mtime: float, kind: bytes = tarfile.REGTYPE
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.uid, info.gid = uid, gid
    info.uname = info.gname = ""
    info.mode = mode
    info.mtime = int(mtime)
    return info


def _link_stays_inside(target: str) -> bool:
    # A relative target that never goes up stays inside the copied tree, even
    # through other kept links (they obey the same rule). `..` is refused
    # outright because a lexical check cannot see that `x/..` leaves the tree
    # when `x` is itself a link.
    return not target.startswith("/") and ".." not in target.split("/")


def tar_from_dir(
    src: Path, out: IO[bytes], *, uid: int, gid: int, exclude: Callable[[str], bool] | None = None
) -> CopyInReport:
    """Write a tar of the *contents* of `src` to `out`; host links are never followed.

    Symlinks whose target is relative and never contains `..` are kept as links;
    other symlinks, FIFOs, sockets and devices are skipped and reported.
    Hardlinked files are copied as separate files. Entries are owned by uid:gid.
    `exclude(relative posix path)` leaves entries out (a directory with all it
    holds); they are reported as "excluded".
    """
    files = size = 0
    skipped: list[SkippedEntry] = []
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:

        def walk(dir_fd: int, rel: str) -> None:
            nonlocal files, size
            for entry in sorted(os.listdir(dir_fd)):
                name = f"{rel}/{entry}" if rel else entry
                if exclude is not None and exclude(name):
                    skipped.append(SkippedEntry(name, "excluded"))
                    continue
                st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                mode = stat.S_IMODE(st.st_mode) & 0o777
                if stat.S_ISDIR(st.st_mode):
                    tar.addfile(_tarinfo(name, uid=uid, gid=gid, mode=mode, mtime=st.st_mtime, kind=tarfile.DIRTYPE))
                    child = os.open(entry, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                    try:
                        walk(child, name)
                    finally:
                        os.close(child)
                elif stat.S_ISREG(st.st_mode):
                    fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
                    with os.fdopen(fd, "rb") as f:
                        fst = os.fstat(f.fileno())
                        info = _tarinfo(name, uid=uid, gid=gid, mode=mode, mtime=fst.st_mtime)
                        info.size = fst.st_size
                        tar.addfile(info, f)
                    files += 1
                    size += info.size
                elif stat.S_ISLNK(st.st_mode):
                    target = os.readlink(entry, dir_fd=dir_fd)
                    if _link_stays_inside(target):
                        info = _tarinfo(name, uid=uid, gid=gid, mode=0o777, mtime=st.st_mtime, kind=tarfile.SYMTYPE)
                        info.linkname = target
                        tar.addfile(info)
                    else:
                        skipped.append(SkippedEntry(name, "symlink", f"target {target!r} leaves the directory"))
                else:
                    skipped.append(SkippedEntry(name, special_file_kind(st.st_mode)))

        root = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
        try:
            walk(root, "")
        finally:
            os.close(root)
    return CopyInReport(files, size, tuple(skipped))


def tar_from_files(
    files: Mapping[str, bytes], out: IO[bytes], *, uid: int, gid: int, mode: int = 0o644
) -> CopyInReport:
    """Write a tar of `{relative path: content}` (parent directories included) to `out`."""
    dirs: set[str] = set()
    total = 0
    now = time.time()
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for rel, content in files.items():
            parts = safe_parts(rel)
            if not parts:
                raise UnsafeArchiveError(f"{rel!r} is not a file path")
            for depth in range(1, len(parts)):
                parent = "/".join(parts[:depth])
                if parent not in dirs:
                    dirs.add(parent)
                    tar.addfile(_tarinfo(parent, uid=uid, gid=gid, mode=0o755, mtime=now, kind=tarfile.DIRTYPE))
            info = _tarinfo("/".join(parts), uid=uid, gid=gid, mode=mode, mtime=now)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
            total += len(content)
    return CopyInReport(len(files), total)
