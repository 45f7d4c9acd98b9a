"""The files the host will copy out, archived by the launcher as its agent exits.

Standard library only, no imports of ours: the launcher (`run_agent.py`)
writes this stream in the sandbox and the host reads it
(`agent_eval_sandbox.inside.exit_archive`).

Copying a directory out through Docker's archive API costs a helper process
of the daemon's (~35 ms of CPU), and the daemon serves one such copy of a
container at a time. The launcher is already running when its agent exits,
so when the go line asks (`collect`) it archives those paths itself and
writes the archives after the agent's output, on its own stdout.

That stream stays the launcher's alone: the agent gets a pipe for its stdout,
which the launcher relays, and the launcher is non-dumpable, so nothing of
the sandbox user's can write into its stdout. Every byte it writes there is
framed, so nothing the agent prints can pass for an archive:

    kind (1 byte) | payload length (4 bytes, big-endian) | payload

    o  the agent's stdout
    A  an archive begins: JSON {"path": P, "found": bool}
    a  the archive's bytes (tar, as Docker's archive of P would be laid out)
    Z  it ends: JSON {"ok": true} or {"ok": false, "error": "..."}

An archive that did not end "ok" (a file the sandbox user cannot read, more
than the caps, a file changed while it was read) is worth nothing: the host
copies that path out the usual way. The launcher reads as the sandbox user,
never through a link (every entry opened relative to its directory with
O_NOFOLLOW, and checked to be the entry it looked at), and stops at the caps
the go line gives.
"""

from __future__ import annotations

import json
import os
import select
import stat
import struct
import sys

# Not `typing.TYPE_CHECKING` and no dataclasses: the launcher starts in the sandbox, on its case's CPU
# (`tests/unit/sandbox/test_inside_imports.py`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import tarfile
    from collections.abc import Callable, Iterator
    from typing import IO

HEADER = struct.Struct(">cI")
AGENT_OUTPUT = b"o"
BEGIN = b"A"
DATA = b"a"
END = b"Z"
KINDS = frozenset({AGENT_OUTPUT, BEGIN, DATA, END})
# No frame the launcher writes is larger: a larger one is not the launcher's.
CHUNK_BYTES = 64 * 1024


class Collect:
    """What the go line asks the launcher to archive once its agent has exited, and its caps."""

    __slots__ = ("paths", "max_bytes", "max_files")

    def __init__(self, paths: list[str], max_bytes: int, max_files: int) -> None:
        self.paths, self.max_bytes, self.max_files = paths, max_bytes, max_files

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collect) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Collect({self.paths!r}, {self.max_bytes}, {self.max_files})"

    def to_json(self) -> dict[str, object]:
        return {"paths": list(self.paths), "max_bytes": self.max_bytes, "max_files": self.max_files}

    @classmethod
    def from_json(cls, data: object) -> Collect:
        if not (isinstance(data, dict) and isinstance(data.get("paths"), list)
                and all(isinstance(p, str) and p.startswith("/") for p in data["paths"])
                and all(isinstance(data.get(k), int) and not isinstance(data[k], bool) and data[k] > 0
                        for k in ("max_bytes", "max_files"))):
            raise ValueError("not {paths: [absolute paths], max_bytes: > 0, max_files: > 0}")
        return cls(list(data["paths"]), data["max_bytes"], data["max_files"])


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def json_frame(kind: bytes, data: dict[str, object]) -> bytes:
    return frame(kind, json.dumps(data, separators=(",", ":")).encode())


# ---- the launcher's side ------------------------------------------------------------------------


class FramedOutput:
    """The launcher's stdout once it frames: whole frames, one writer (the launcher's main thread)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def agent(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK_BYTES):
            self.write(frame(AGENT_OUTPUT, data[start:start + CHUNK_BYTES]))


def relay_until_exit(pid: int, pipe_fd: int, out: FramedOutput, has_exited: Callable[[], bool]) -> None:
    """Relay the agent's stdout pipe into `out` until the agent exits, then whatever it wrote before.

    The launcher's main thread does it, woken by the pipe or by the agent's exit (a pidfd): no other
    thread, which the agent's processes could starve (they may change the launcher's scheduling),
    sits between the agent's last write and the archives. What is in the pipe when the agent has
    exited is all it wrote (it cannot exit while blocked on a full pipe); what a process it left
    behind writes later is not its output and is not relayed.
    """
    try:
        exited: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exited = None  # then looked for every 20 ms
    os.set_blocking(pipe_fd, False)
    watched = [pipe_fd] if exited is None else [pipe_fd, exited]
    try:
        while True:
            ready, _, _ = select.select(watched, [], [], 0.02 if exited is None else None)
            if pipe_fd in ready and not _relay_available(pipe_fd, out):
                watched.remove(pipe_fd)  # EOF before the exit: nothing more can come
            if (exited is not None and exited in ready) or (exited is None and has_exited()) \
                    or pipe_fd not in watched:
                break
        if pipe_fd in watched:
            _relay_available(pipe_fd, out, limit=_readable_bytes(pipe_fd))
    finally:
        if exited is not None:
            os.close(exited)


def _readable_bytes(fd: int) -> int:
    import fcntl
    import termios

    count = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return int.from_bytes(count, sys.byteorder)


def _relay_available(pipe_fd: int, out: FramedOutput, limit: int | None = None) -> bool:
    """Relay what can be read now (at most `limit` bytes); False at EOF."""
    left = limit
    while left is None or left > 0:
        try:
            data = os.read(pipe_fd, CHUNK_BYTES if left is None else min(CHUNK_BYTES, left))
        except BlockingIOError:
            return True
        if not data:
            return False
        out.agent(data)
        if left is not None:
            left -= len(data)
    return True


class _TooMuch(Exception):
    pass


class _DataFrames:
    """A write-only file for tarfile: its bytes go out as DATA frames, up to `max_bytes`."""

    def __init__(self, out: FramedOutput, max_bytes: int) -> None:
        self._out, self._left = out, max_bytes
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._left -= len(data)
        if self._left < 0:
            raise _TooMuch("the archive is larger than the copy-out cap")
        self._buffer += data
        if len(self._buffer) >= CHUNK_BYTES:
            self.flush()
        return len(data)

    def flush(self) -> None:
        for start in range(0, len(self._buffer), CHUNK_BYTES):
            self._out.write(frame(DATA, bytes(self._buffer[start:start + CHUNK_BYTES])))
        self._buffer.clear()


# Deeper trees are left to Docker's copy (whose extraction notes what it cuts below 64 levels).
MAX_DEPTH = 128
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def lstat_at(dir_fd: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _open_as(dir_fd: int, name: str, expected: os.stat_result, flags: int = 0) -> int:
    """`name` opened without following a link, and still the entry `expected` describes.

    An entry swapped between the look and the open (a link, another file: found by the red team,
    the archive held the launcher's own /proc/self/status under a workspace name) is an error."""
    fd = os.open(name, _OPEN | flags, dir_fd=dir_fd)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino) or \
            stat.S_IFMT(st.st_mode) != stat.S_IFMT(expected.st_mode):
        os.close(fd)
        raise OSError(f"{name!r} changed while it was archived")
    return fd


class _TreeArchive:
    """A directory tree into a tar stream, as the sandbox user sees it, never through a link.

    Every entry is looked at and opened relative to its directory's descriptor, without following
    links; files are read from the descriptor that was checked. Links, FIFOs go in as what they are;
    sockets and devices are left out (as Docker's archive does)."""

    def __init__(self, tar: tarfile.TarFile, max_files: int) -> None:
        import tarfile  # here, not at the top: a launcher that collects nothing never needs it

        self._tarfile = tarfile
        self._tar = tar
        self._left = max_files
        self._inodes: dict[tuple[int, int], str] = {}

    def _info(self, name: str, st: os.stat_result) -> tarfile.TarInfo:
        self._left -= 1
        if self._left < 0:
            raise _TooMuch("the archive has more entries than the copy-out cap")
        info = self._tarfile.TarInfo(name)
        info.mode, info.uid, info.gid, info.mtime = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime
        return info

    def directory(self, dir_fd: int, name: str, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise _TooMuch(f"the tree is deeper than {MAX_DEPTH} levels")
        info = self._info(name, os.fstat(dir_fd))
        info.type = self._tarfile.DIRTYPE
        self._tar.addfile(info)
        with os.scandir(dir_fd) as listing:
            names = [entry.name for entry in listing]
        for child in names:
            self.entry(dir_fd, child, f"{name}/{child}", depth)

    def entry(self, dir_fd: int, child: str, name: str, depth: int) -> None:
        st = lstat_at(dir_fd, child)
        if stat.S_ISDIR(st.st_mode):
            fd = _open_as(dir_fd, child, st, os.O_DIRECTORY)
            try:
                self.directory(fd, name, depth + 1)
            finally:
                os.close(fd)
            return
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            return
        info = self._info(name, st)
        if stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = self._tarfile.SYMTYPE, os.readlink(child, dir_fd=dir_fd)
            self._tar.addfile(info)
        elif stat.S_ISFIFO(st.st_mode):
            info.type = self._tarfile.FIFOTYPE
            self._tar.addfile(info)
        elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in self._inodes:
            info.type, info.linkname = self._tarfile.LNKTYPE, self._inodes[(st.st_dev, st.st_ino)]
            self._tar.addfile(info)
        else:
            if st.st_nlink > 1:
                self._inodes[(st.st_dev, st.st_ino)] = name
            with os.fdopen(_open_as(dir_fd, child, st), "rb") as data:
                info.size = os.fstat(data.fileno()).st_size
                self._tar.addfile(info, data)  # exactly `size` bytes, or an error


def archive_one(path: str, out: FramedOutput, max_bytes: int, max_files: int) -> None:
    """BEGIN, DATA..., END for the directory `path`; an error of any kind ends it as not ok.

    `path` is reached from / one directory at a time without following a link: a path that is not
    a directory all the way (a link the agent put in its place, a file) is not ok, and left to
    Docker's copy, which resolves it as it always did."""
    import tarfile  # only when asked: a launcher that collects nothing never needs it

    parts = [part for part in path.split("/") if part] or ["."]
    dir_fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = below
        st = lstat_at(dir_fd, parts[-1])
    except FileNotFoundError:
        os.close(dir_fd)
        out.write(json_frame(BEGIN, {"path": path, "found": False}))
        out.write(json_frame(END, {"ok": True}))
        return
    except OSError as exc:
        os.close(dir_fd)
        out.write(json_frame(BEGIN, {"path": path, "found": True}))
        out.write(json_frame(END, {"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return
    out.write(json_frame(BEGIN, {"path": path, "found": True}))
    body = _DataFrames(out, max_bytes)
    try:
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(f"{path} is not a directory")
        top = _open_as(dir_fd, parts[-1], st, os.O_DIRECTORY)
        try:
            # Laid out as Docker's archive of the path: its own name on top, links kept as links.
            with tarfile.open(fileobj=body, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                _TreeArchive(tar, max_files).directory(top, parts[-1])
        finally:
            os.close(top)
        body.flush()
    except Exception as exc:  # noqa: BLE001 - whatever it was, this archive is not to be used
        out.write(json_frame(END, {"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return
    finally:
        os.close(dir_fd)
    out.write(json_frame(END, {"ok": True}))


def archive_all(collect: Collect, out: FramedOutput) -> None:
    for path in collect.paths:
        archive_one(path, out, collect.max_bytes, collect.max_files)


# ---- the host's side ----------------------------------------------------------------------------


class FrameError(ValueError):
    """The framed stream is not what the launcher writes."""


class ExitArchive:
    """One directory as the launcher archived it: its tar in `file` (None when the path was missing).

    The launcher archives only a directory (anything else ends not ok), laid out as Docker's archive
    of it: its own name on top."""

    __slots__ = ("path", "found", "file")

    def __init__(self, path: str, found: bool, file: IO[bytes] | None = None) -> None:
        self.path, self.found, self.file = path, found, file

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


# Archives past this size wait on disk rather than in the controller's memory.
SPOOL_IN_MEMORY_BYTES = 8 * 1024 * 1024


class FrameReader:
    """Takes the framed stdout in pieces as they come; the agent's output goes to `on_output`.

    The stream must be exactly what the launcher writes for `collect`: the agent's output, then
    one archive of each path asked for, in order, then nothing. Anything else breaks it (fail
    closed): from there on it is passed on to `on_output` as it is, and none of its archives
    count. Archives over the cap are dropped as they grow (the launcher stops at the same cap).
    """

    def __init__(self, on_output: Callable[[bytes], None], collect: Collect) -> None:
        self._on_output = on_output
        self._paths = list(collect.paths)
        self._max_bytes = collect.max_bytes
        self._ended = 0  # archives ended so far, of `_paths` in order
        self._pending = bytearray()
        self._current: ExitArchive | None = None
        self._size = 0
        self._done: dict[str, ExitArchive] = {}
        self.broken: str | None = None

    def feed(self, data: bytes) -> None:
        if self.broken is not None:
            self._on_output(data)
            return
        self._pending += data
        try:
            for kind, payload in self._frames():
                self._take(kind, payload)
        except FrameError as exc:
            self.broken = str(exc)
            self.close()
            rest, self._pending = bytes(self._pending), bytearray()
            if rest:
                self._on_output(rest)

    def _frames(self) -> Iterator[tuple[bytes, bytes]]:
        while len(self._pending) >= HEADER.size:
            kind, size = HEADER.unpack_from(self._pending)
            if kind not in KINDS:
                raise FrameError(f"unknown frame kind {kind!r}")
            if size > CHUNK_BYTES:
                raise FrameError(f"a {kind!r} frame of {size} bytes")
            if len(self._pending) < HEADER.size + size:
                return
            payload = bytes(self._pending[HEADER.size:HEADER.size + size])
            del self._pending[:HEADER.size + size]
            yield kind, payload

    def _take(self, kind: bytes, payload: bytes) -> None:
        if self._ended == len(self._paths):
            raise FrameError("a frame after the last archive")
        if kind == AGENT_OUTPUT:
            if self._current is not None or self._ended:
                raise FrameError("the agent's output among the archives")
            self._on_output(payload)
        elif kind == BEGIN:
            self._begin(_json(payload))
        elif kind == DATA:
            self._data(payload)
        else:
            self._end(_json(payload))

    def _begin(self, begin: dict[str, object]) -> None:
        path, found = begin.get("path"), begin.get("found")
        if self._current is not None or not isinstance(found, bool):
            raise FrameError("an archive began inside another, or without saying what it holds")
        if path != self._paths[self._ended]:
            raise FrameError(f"an archive of {path!r}, not of the next path asked for")
        import tempfile  # the host's side only: the launcher does not pay for its import

        spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115 - ExitArchive.close
        self._current = ExitArchive(path, found, spool)
        self._size = 0

    def _data(self, payload: bytes) -> None:
        current = self._current
        if current is None:
            raise FrameError("archive bytes outside an archive")
        if current.file is None:
            return
        self._size += len(payload)
        if self._size > self._max_bytes:
            current.close()  # over the cap: copied out the usual way
            current.file = None
        else:
            current.file.write(payload)

    def _end(self, end: dict[str, object]) -> None:
        current, self._current = self._current, None
        if current is None or not isinstance(end.get("ok"), bool):
            raise FrameError("an archive ended that never began")
        self._ended += 1
        if not end["ok"] or current.file is None:
            current.close()
            return
        if not current.found:
            current.close()
            current.file = None
        else:
            current.file.seek(0)
        self._done[current.path] = current

    def close(self) -> None:
        """Let go of every archive (their spooled files)."""
        for archive in (*self._done.values(), *([self._current] if self._current else [])):
            archive.close()
        self._done.clear()
        self._current = None

    def archives(self) -> dict[str, ExitArchive]:
        """The archives that ended whole and under the cap, by path, now the caller's to close (none
        if the stream broke or was cut)."""
        if self.broken is not None or self._pending or self._ended < len(self._paths):
            self.close()
            return {}
        done, self._done = self._done, {}
        return done


def _json(payload: bytes) -> dict[str, object]:
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise FrameError(f"a frame that is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise FrameError("a frame that is not a JSON object")
    return data
