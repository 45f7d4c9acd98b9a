"""Tar streams as a hostile sandbox could shape them, through `extract_tar`:
a clean copy or an UnsafeArchiveError, and never a write outside the destination."""

from __future__ import annotations

import io
import os
import resource
import signal
import stat
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from agent_eval_sandbox.errors import UnsafeArchiveError
from agent_eval_sandbox.sandbox.archive import CopyOutReport, extract_tar

from .checks import outcome, snapshot

TOP = "workspace"
PARTS = st.sampled_from(["a", "b", "..", ".", "", "link", "out", "x" * 300, "ü", " ", "-", "..."]) | st.text(
    min_size=1, max_size=6
).filter(lambda s: "/" not in s and "\0" not in s)
NAMES = st.one_of(
    st.lists(PARTS, min_size=1, max_size=4).map("/".join),
    st.lists(PARTS, min_size=1, max_size=3).map(lambda parts: f"{TOP}/" + "/".join(parts)),
    st.sampled_from(["/etc/passwd", "../outside/x", f"{TOP}/../outside/x", f"{TOP}/link/x", f"{TOP}/", "./",
                     f"{TOP}/a/", f"{TOP}/link", "//x", f"{TOP}//a"]),
)
TYPES = st.sampled_from([tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
                         tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE, tarfile.CONTTYPE, b"Z"])
LINKS = NAMES | st.sampled_from(["/etc/passwd", "../outside", "../../outside/canary", f"{TOP}/a", "a"])
MEMBERS = st.lists(
    st.fixed_dictionaries({
        "name": NAMES,
        "type": TYPES,
        "linkname": LINKS,
        "data": st.binary(max_size=64),
        "mode": st.integers(min_value=0, max_value=0o7777),
        "mtime": st.integers(min_value=0, max_value=2**33),
    }),
    max_size=8,
)


def _archive(members: list[dict[str, Any]], fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for member in members:
            info = tarfile.TarInfo(member["name"])
            info.type, info.mode, info.mtime = member["type"], member["mode"], member["mtime"]
            if member["type"] in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = member["linkname"]
            payload = member["data"] if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE) else b""
            info.size = len(payload)
            try:
                tar.addfile(info, io.BytesIO(payload))
            except ValueError:  # a name this tar format cannot hold: the sandbox cannot send it either
                continue
    return buf.getvalue()


@given(MEMBERS, st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT]),
       st.booleans(), st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=10),
       st.one_of(st.none(), st.integers(min_value=0, max_value=4096)), st.binary(max_size=8))
def test_extraction_stays_in_its_destination(members: list[dict[str, Any]], fmt: int, strip: bool, max_bytes: int,
                                             max_files: int, cut: int | None, noise: bytes) -> None:
    data = _archive(members, fmt)
    if cut is not None:  # a stream cut short or with garbage in it
        data = data[:cut] + noise + data[cut + len(noise):]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dest, outside = root / "dest", root / "outside"
        outside.mkdir()
        (outside / "canary").write_text("host file\n")
        dest.mkdir()
        # What a destination may already hold: a link out, a file, a directory.
        os.symlink(outside, dest / "link")
        (dest / "a").mkdir()
        (dest / "b").write_text("old\n")
        before = snapshot(root, skip=[dest])
        result = outcome(
            lambda: extract_tar(io.BytesIO(data), dest, strip_top=TOP if strip else None,
                                max_bytes=max_bytes, max_files=max_files),
            expected=UnsafeArchiveError,
        )
        assert snapshot(root, skip=[dest]) == before, "something outside the destination changed"
        for current, dirs, files in os.walk(dest):
            for name in dirs + files:
                path = Path(current) / name
                st_mode = path.lstat().st_mode
                if stat.S_ISLNK(st_mode):
                    assert path == dest / "link", f"extraction made a link: {path}"
                    continue
                assert stat.S_ISDIR(st_mode) or stat.S_ISREG(st_mode), f"not a file or directory: {path}"
                assert not st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), f"special bits on {path}"
        if isinstance(result, CopyOutReport):
            assert result.bytes <= max_bytes and result.files + result.dirs <= max_files


@given(st.binary(max_size=2048))
def test_random_bytes_are_not_an_archive(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "dest"
        outcome(lambda: extract_tar(io.BytesIO(data), dest, strip_top=None, max_bytes=10**6, max_files=100),
                expected=UnsafeArchiveError)
        assert not any(p.is_symlink() for p in dest.rglob("*"))


def _one_file(size: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("big")
        info.size = size
        tar.addfile(info, io.BytesIO(b"x" * size))
    return buf.getvalue()


def test_a_destination_that_refuses_writes_is_a_clear_error(tmp_path: Path) -> None:
    """A full host disk (here: a file size limit) stops the copy with an UnsafeArchiveError."""
    previous_signal = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, previous_limit[1]))
    try:
        error = outcome(lambda: extract_tar(io.BytesIO(_one_file(65536)), tmp_path / "dest", strip_top=None,
                                            max_bytes=10**6, max_files=10), expected=UnsafeArchiveError)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous_limit)
        signal.signal(signal.SIGXFSZ, previous_signal)
    assert isinstance(error, UnsafeArchiveError) and "File too large" in error.message


def test_a_broken_transport_is_not_blamed_on_the_archive(tmp_path: Path) -> None:
    """The stream's own errors pass through unchanged, for the Docker boundary to map."""

    class Broken(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            if not self.data:
                raise requests.exceptions.ChunkedEncodingError("connection broken")
            n = min(len(buffer), len(self.data), 512)
            buffer[:n], self.data = self.data[:n], self.data[n:]
            return n

    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        extract_tar(io.BufferedReader(Broken(_one_file(65536)[:2048])), tmp_path / "dest", strip_top=None,
                    max_bytes=10**6, max_files=10)
