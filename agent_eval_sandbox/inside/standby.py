"""The launcher on standby: started ahead of its case, it waits for the rest of its command on stdin.

Standard library only, no imports of ours: `run_agent.py` reads the go line in
the sandbox; the host writes it (`agent_eval_sandbox.inside.standby`).

A sandbox made ahead of its case (sandbox/pool.py) also starts its launcher
ahead, as `LAUNCHER --standby`, so that the case's agent does not wait for a
`docker exec` and a Python start. When the case runs, the host writes one
line on that process's stdin, then closes it:

    {"argv": [...], "env": {...}, "cwd": "/workspace", "archives": [{"dest": "/workspace", "size": N}],
     "collect": {"paths": [...], "max_bytes": N, "max_files": N}}

followed by the archives' bytes (tar, one after the other, `size` bytes
each): the files the host copied into the untouched sandbox, which the
launcher unpacks into their `dest` as the sandbox user (the host made the
archives, with the sandbox user's ownership: the same files a `docker cp`
would have put there, without its ~50 ms). The host sends only what the
sandbox user may write: nothing over earlier files, nothing at or below a
bind mount's directories (runc makes them as root). Then it goes on exactly as
`LAUNCHER argv...` started with `env` added to its environment and `cwd` as
its directory would, and with `collect` (optional) it archives those paths
as its agent exits (exit_archive.py). End of input without a line means the case never ran
its agent here (or the stream broke): the launcher starts nothing and exits
125, never 0.

Only the controller holds that stdin: the launcher makes itself non-dumpable
before it reads it, so nothing else of the sandbox user's can reach it through
/proc.
"""

from __future__ import annotations

import contextlib
import json
import os

# Not `typing.TYPE_CHECKING` and no dataclasses: each launcher starts in the sandbox, on its case's CPU,
# and those imports cost it ~9 ms (`tests/unit/sandbox/test_inside_imports.py`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import tarfile
    from collections.abc import Iterator
    from typing import BinaryIO

FLAG = "--standby"
# The argv and environment of `claude -p` with its flags and plugin dirs; far more is not a go line.
MAX_LINE_BYTES = 1024 * 1024


class GoLineError(ValueError):
    """The line on the launcher's stdin is not a go line."""


class Archive:
    """`size` bytes of tar on stdin after the go line, to unpack into `dest`."""

    __slots__ = ("dest", "size")

    def __init__(self, dest: str, size: int) -> None:
        self.dest, self.size = dest, size

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Archive) and (self.dest, self.size) == (other.dest, other.size)

    def __repr__(self) -> str:
        return f"Archive({self.dest!r}, {self.size})"


class Go:
    """The go line, read: the launcher's argv, environment and directory, the archives that follow."""

    __slots__ = ("argv", "env", "cwd", "archives", "collect")

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str | None,
                 archives: list[Archive] | None = None, collect: dict[str, object] | None = None) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.archives = archives if archives is not None else []
        self.collect = collect  # exit_archive.Collect's JSON, checked by the launcher

    def _fields(self) -> tuple[object, ...]:
        return self.argv, self.env, self.cwd, self.archives, self.collect

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Go) and self._fields() == other._fields()

    def __repr__(self) -> str:
        return "Go({!r}, {!r}, {!r}, {!r}, {!r})".format(*self._fields())


def encode(argv: list[str], env: dict[str, str], cwd: str | None, archives: list[Archive] | None = None,
           collect: dict[str, object] | None = None) -> bytes:
    """The go line; the archives' bytes are to follow it, in this order."""
    data: dict[str, object] = {"argv": list(argv), "env": dict(env), "cwd": cwd,
                               "archives": [{"dest": a.dest, "size": a.size} for a in archives or []]}
    if collect is not None:
        data["collect"] = collect
    line = json.dumps(data, separators=(",", ":")).encode() + b"\n"
    if len(line) > MAX_LINE_BYTES:
        raise GoLineError(f"the go line is {len(line)} bytes, more than {MAX_LINE_BYTES}")
    return line


def read(stream: BinaryIO) -> Go | None:
    """The go line from `stream`; None at end of input (the case never started its agent here)."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise GoLineError("the go line ended before its newline" if len(line) <= MAX_LINE_BYTES
                          else f"the go line is longer than {MAX_LINE_BYTES} bytes")
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise GoLineError(f"the go line is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise GoLineError("the go line is not a JSON object")
    argv, env, cwd, archives = data.get("argv"), data.get("env"), data.get("cwd"), data.get("archives", [])
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise GoLineError("the go line's argv is not a list of strings")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise GoLineError("the go line's env is not a mapping of strings")
    if cwd is not None and not isinstance(cwd, str):
        raise GoLineError("the go line's cwd is not a string")
    if not (isinstance(archives, list) and all(
            isinstance(a, dict) and isinstance(a.get("dest"), str) and a["dest"].startswith("/")
            and isinstance(a.get("size"), int) and not isinstance(a["size"], bool) and a["size"] >= 0
            for a in archives)):
        raise GoLineError("the go line's archives are not a list of {dest: absolute path, size: bytes}")
    collect = data.get("collect")
    if collect is not None and not isinstance(collect, dict):
        raise GoLineError("the go line's collect is not an object")
    return Go(argv, env, cwd, [Archive(a["dest"], a["size"]) for a in archives], collect)


class _Exactly:
    """The next `size` bytes of a stream, as a file: the archive reads no further."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self._stream, self._left = stream, size

    def read(self, n: int = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._stream.read(n) if n else b""
        self._left -= len(data)
        if n and not data:
            raise EOFError(f"the input ended {self._left} bytes before the archive's end")
        return data

    def drain(self) -> None:
        while self._left:
            self.read(65536)


def unpack(stream: BinaryIO, archive: Archive) -> None:
    """Unpack the archive that comes next on `stream` into its dest (made if missing)."""
    import tarfile  # only on this path: the launcher started by `docker exec` never needs it

    os.makedirs(archive.dest, exist_ok=True)
    body = _Exactly(stream, archive.size)
    # The controller's own archive of the staged files: kept as it is, like `docker cp` would (Pythons
    # that filter archives by default would otherwise drop mode bits).
    trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    links: list[tarfile.TarInfo] = []

    def members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
        for member in tar:
            if member.issym():
                links.append(member)
            yield member

    with tarfile.open(fileobj=body, mode="r|") as tar:  # type: ignore[call-overload]
        tar.extractall(archive.dest, members=members(tar), **trusted)
    # tarfile leaves a symlink's own time at now; `docker cp` gives it the archive's.
    for link in links:
        with contextlib.suppress(OSError):
            os.utime(os.path.join(archive.dest, link.name), (link.mtime, link.mtime), follow_symlinks=False)
    body.drain()
