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
    A  an archive begins: JSON {"path": P, "found": bool, "dir": bool}
    a  the archive's bytes (tar, as Docker's archive of P would be laid out)
    Z  it ends: JSON {"ok": true} or {"ok": false, "error": "..."}

An archive that did not end "ok" (a file the sandbox user cannot read, more
than the caps, a file changed while it was read) is worth nothing: the host
copies that path out the usual way. The launcher reads as the sandbox user,
never follows a link, and stops at the caps the go line gives.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import tarfile

HEADER = struct.Struct(">cI")
AGENT_OUTPUT = b"o"
BEGIN = b"A"
DATA = b"a"
END = b"Z"
KINDS = frozenset({AGENT_OUTPUT, BEGIN, DATA, END})
CHUNK_BYTES = 64 * 1024
# A JSON frame larger than this is not one the launcher wrote.
MAX_JSON_FRAME = 64 * 1024


@dataclass(frozen=True)
class Collect:
    """What the go line asks the launcher to archive once its agent has exited, and its caps."""

    paths: list[str]
    max_bytes: int
    max_files: int

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
    """The launcher's stdout once it frames: whole frames only, from any thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._agent_open = True

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def write(self, data: bytes) -> None:
        with self._lock:
            self._write(data)

    def agent(self, data: bytes) -> bool:
        """Relay the agent's output; False once `close_agent` was called (its frames are over)."""
        with self._lock:
            if not self._agent_open:
                return False
            for start in range(0, len(data), CHUNK_BYTES):
                self._write(frame(AGENT_OUTPUT, data[start:start + CHUNK_BYTES]))
            return True

    def close_agent(self) -> None:
        with self._lock:
            self._agent_open = False


def relay(pipe_fd: int, out: FramedOutput) -> None:
    """Copy the agent's stdout pipe into `out` until EOF or until `out` stops taking it."""
    try:
        while True:
            data = os.read(pipe_fd, CHUNK_BYTES)
            if not data or not out.agent(data):
                return
    except OSError:
        return


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
        if self._buffer:
            self._out.write(frame(DATA, bytes(self._buffer)))
            self._buffer.clear()


def archive_one(path: str, out: FramedOutput, max_bytes: int, max_files: int) -> None:
    """BEGIN, DATA..., END for `path`; an error of any kind ends it as not ok."""
    import tarfile  # only when asked: a launcher that collects nothing never needs it

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        out.write(json_frame(BEGIN, {"path": path, "found": False, "dir": False}))
        out.write(json_frame(END, {"ok": True}))
        return
    except OSError as exc:
        out.write(json_frame(BEGIN, {"path": path, "found": True, "dir": False}))
        out.write(json_frame(END, {"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return
    out.write(json_frame(BEGIN, {"path": path, "found": True, "dir": stat.S_ISDIR(st.st_mode)}))
    body = _DataFrames(out, max_bytes)
    members = 0

    def count(member: tarfile.TarInfo) -> tarfile.TarInfo:
        nonlocal members
        members += 1
        if members > max_files:
            raise _TooMuch("the archive has more entries than the copy-out cap")
        return member

    try:
        # Laid out as Docker's archive of the path: its own name on top, links kept as links.
        with tarfile.open(fileobj=body, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
            tar.add(path, arcname=os.path.basename(path.rstrip("/")) or "/", recursive=True, filter=count)
        body.flush()
    except Exception as exc:  # noqa: BLE001 - whatever it was, this archive is not to be used
        out.write(json_frame(END, {"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return
    out.write(json_frame(END, {"ok": True}))


def archive_all(collect: Collect, out: FramedOutput) -> None:
    for path in collect.paths:
        archive_one(path, out, collect.max_bytes, collect.max_files)


# ---- the host's side ----------------------------------------------------------------------------


class FrameError(ValueError):
    """The framed stream is not what the launcher writes."""


@dataclass
class ExitArchive:
    """One path as the launcher archived it: its tar in `file` (None when the path was missing)."""

    path: str
    found: bool
    is_dir: bool
    file: IO[bytes] | None = None

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


# Archives past this size wait on disk rather than in the controller's memory.
SPOOL_IN_MEMORY_BYTES = 8 * 1024 * 1024


class FrameReader:
    """Takes the framed stdout in pieces as they come; the agent's output goes to `on_output`.

    Archives over `max_bytes` are dropped as they grow (the launcher stops at the same cap).
    A stream that breaks the framing is passed on to `on_output` as it is from there on, and
    none of its archives count.
    """

    def __init__(self, on_output: Callable[[bytes], None], max_bytes: int) -> None:
        self._on_output = on_output
        self._max_bytes = max_bytes
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
            if kind in (BEGIN, END) and size > MAX_JSON_FRAME:
                raise FrameError(f"a {kind!r} frame of {size} bytes")
            if len(self._pending) < HEADER.size + size:
                return
            payload = bytes(self._pending[HEADER.size:HEADER.size + size])
            del self._pending[:HEADER.size + size]
            yield kind, payload

    def _take(self, kind: bytes, payload: bytes) -> None:
        if kind == AGENT_OUTPUT:
            self._on_output(payload)
        elif kind == BEGIN:
            begin = _json(payload)
            path, found, is_dir = begin.get("path"), begin.get("found"), begin.get("dir")
            if self._current is not None or not isinstance(path, str) or not isinstance(found, bool) \
                    or not isinstance(is_dir, bool):
                raise FrameError("an archive began inside another, or without its path")
            import tempfile  # the host's side only: the launcher does not pay for its import

            spool = tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115 - ExitArchive.close
            self._current = ExitArchive(path, found, is_dir, spool)
            self._size = 0
        elif kind == DATA:
            current = self._current
            if current is None:
                raise FrameError("archive bytes outside an archive")
            if current.file is not None:
                self._size += len(payload)
                if self._size > self._max_bytes:
                    current.close()  # over the cap: copied out the usual way
                    current.file = None
                else:
                    current.file.write(payload)
        else:
            end = _json(payload)
            current, self._current = self._current, None
            if current is None or not isinstance(end.get("ok"), bool):
                raise FrameError("an archive ended that never began")
            if not end["ok"] or current.file is None:
                current.close()
                return
            if not current.found:
                current.close()
                current.file = None
            else:
                current.file.seek(0)
            self._done.pop(current.path, ExitArchive("", False, False)).close()
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
        if self.broken is not None or self._pending or self._current is not None:
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
