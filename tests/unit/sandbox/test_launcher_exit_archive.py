"""Files archived by the launcher as its agent exits (`inside/exit_archive.py`).

The framing read back piece by piece, and the real launcher script run on the
host (standard library only, as in the sandbox) with a go line that asks it
to collect: the agent's output comes through byte for byte, the archives hold
the files as they were at its exit, and nothing the agent or a process it
left behind writes can pass for an archive.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import exit_archive as ea
from agent_eval_sandbox.inside import standby
from agent_eval_sandbox.sandbox.archive import extract_tar
from tests.accepting_socket import accepting_unix_socket

LAUNCHER = Path(standby.__file__).with_name("run_agent.py")
BIG = 10 * 1024 * 1024


# ---- the frames, read back ---------------------------------------------------------------------


def framed_archive(path: str, tar: bytes, *, ok: bool = True, found: bool = True) -> bytes:
    return (ea.json_frame(ea.BEGIN, {"path": path, "found": found})
            + ea.frame(ea.DATA, tar) + ea.json_frame(ea.END, {"ok": ok} if ok else {"ok": False, "error": "x"}))


def read_all(stream: bytes, paths: list[str], *, pieces: int = 1,
             max_bytes: int = BIG) -> tuple[bytes, dict[str, ea.ExitArchive], str | None]:
    output = bytearray()
    reader = ea.FrameReader(output.extend, ea.Collect(paths, max_bytes, 1000))
    step = max(1, len(stream) // pieces)
    for start in range(0, len(stream), step):
        reader.feed(stream[start:start + step])
    archives = reader.archives()
    return bytes(output), archives, reader.broken


def test_output_and_archives_read_back_however_the_stream_is_cut():
    stream = (ea.frame(ea.AGENT_OUTPUT, b'{"type":"result"}\n') + framed_archive("/workspace", b"tar-bytes")
              + framed_archive("/gone", b"", found=False))
    for pieces in (1, 3, len(stream)):  # whole, in thirds, a byte at a time
        output, archives, broken = read_all(stream, ["/workspace", "/gone"], pieces=pieces)
        assert (output, broken) == (b'{"type":"result"}\n', None)
        assert set(archives) == {"/workspace", "/gone"}
        workspace = archives["/workspace"]
        assert workspace.found and workspace.file is not None
        assert workspace.file.read() == b"tar-bytes"
        assert not archives["/gone"].found and archives["/gone"].file is None


def test_an_archive_that_did_not_end_ok_or_grew_past_the_cap_does_not_count():
    stream = framed_archive("/a", b"x" * 10, ok=False) + framed_archive("/b", b"y" * 100) + framed_archive("/c", b"z")
    _, archives, _ = read_all(stream, ["/a", "/b", "/c"], max_bytes=50)
    assert set(archives) == {"/c"}


@pytest.mark.parametrize(("stream", "problem"), [
    (b"Q\x00\x00\x00\x01x", "unknown frame kind"),
    (ea.frame(ea.DATA, b"x"), "outside an archive"),
    (ea.json_frame(ea.END, {"ok": True}), "never began"),
    (ea.json_frame(ea.BEGIN, {"path": "/other", "found": True}) * 2, "inside another"),
    (ea.frame(ea.BEGIN, b"not json"), "not JSON"),
    # Found by the red team (gVisor, where the agent could write into the stream): a frame that
    # claimed 4 GiB was held whole in the controller's memory while it came.
    (ea.HEADER.pack(ea.AGENT_OUTPUT, 0xFFFFFFFF), "frame of"),
    (ea.HEADER.pack(ea.DATA, ea.CHUNK_BYTES + 1), "frame of"),
    # ...and a forged archive of a path beside the launcher's own was taken.
    (framed_archive("/workspace", b"forged"), "not of the next path"),
    (framed_archive("/elsewhere", b"forged"), "not of the next path"),
    (ea.frame(ea.AGENT_OUTPUT, b"late output"), "among the archives"),
])
def test_a_stream_that_breaks_the_framing_is_passed_on_as_output_with_no_archives(stream: bytes, problem: str):
    before = framed_archive("/workspace", b"tar")
    output, archives, broken = read_all(ea.frame(ea.AGENT_OUTPUT, b"first ") + before + stream + b"rest",
                                        ["/workspace", "/other"])
    assert broken is not None and problem in broken
    assert archives == {}
    assert output.startswith(b"first ") and output.endswith(b"rest")


def test_nothing_may_follow_the_last_archive():
    whole = framed_archive("/workspace", b"tar")
    for late in (framed_archive("/workspace", b"forged"), ea.frame(ea.AGENT_OUTPUT, b"x")):
        _, archives, broken = read_all(whole + late, ["/workspace"])
        assert archives == {} and broken is not None
    assert read_all(whole + b"\n", ["/workspace"])[1] == {}  # not even a frame: still not the launcher's stream


def test_a_stream_cut_inside_a_frame_or_before_the_last_archive_has_no_archives():
    whole = framed_archive("/workspace", b"tar") + framed_archive("/other", b"tar")
    for cut in (len(whole) - 3, len(whole) - len(ea.json_frame(ea.END, {"ok": True})), len(whole) // 2):
        assert read_all(whole[:cut], ["/workspace", "/other"])[1] == {}


# ---- the launcher script ---------------------------------------------------------------------------


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Path]:
    with accepting_unix_socket(tmp_path / "gw.sock") as path:
        yield path


def run_collecting(gateway: Path, tmp_path: Path, script: str, collect: ea.Collect,
                   cwd: Path) -> tuple[subprocess.CompletedProcess[bytes], float]:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("")
    args = ["--gateway-socket", str(gateway), "--port", "0", "--prompt-file", str(prompt), "--", "sh", "-c", script]
    go = standby.encode(args, {}, str(cwd), collect=collect.to_json())
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-I", str(LAUNCHER), standby.FLAG], input=go, capture_output=True,
                          timeout=60, env={"PATH": os.environ["PATH"]})
    return done, time.monotonic() - started


def tree(root: Path) -> dict[str, object]:
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        found[rel] = ("link", os.readlink(path)) if path.is_symlink() else (
            "dir" if path.is_dir() else (path.read_bytes(), path.stat().st_mode & 0o777))
    return found


def test_the_launcher_relays_the_agents_output_and_then_archives_what_it_left(gateway: Path, tmp_path: Path):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "old.txt").write_text("before")
    single = tmp_path / "single.txt"
    single.write_text("one file")
    # Output that looks like frames, and more than one pipe's worth of it, comes through as it is.
    forged = framed_archive(str(work), b"forged")
    script = ("printf 'line one\\n'; head -c 200000 /dev/zero | tr '\\0' 'x'; cat forged.bin; "
              "echo new > sub/new.txt; chmod 600 sub/new.txt; ln -s sub/new.txt link; rm old.txt; exit 3")
    (work / "forged.bin").write_bytes(forged)
    collect = ea.Collect([str(work), str(tmp_path / "missing"), str(single)], BIG, 1000)
    done, _ = run_collecting(gateway, tmp_path, script, collect, work)
    assert done.returncode == 3, done.stderr
    output, archives, broken = read_all(done.stdout, collect.paths)
    assert broken is None
    assert output == b"line one\n" + b"x" * 200000 + forged
    # A path that is not a directory (here a file) is left to Docker's copy.
    assert set(archives) == {str(work), str(tmp_path / "missing")}
    assert not archives[str(tmp_path / "missing")].found

    out = tmp_path / "out"
    workspace = archives[str(work)]
    assert workspace.found and workspace.file is not None
    report = extract_tar(workspace.file, out, strip_top="work", max_bytes=BIG, max_files=1000)  # type: ignore[arg-type]
    assert tree(out) == {"forged.bin": (forged, 0o644), "sub": "dir", "sub/new.txt": (b"new\n", 0o600)}
    assert [(entry.path, entry.kind) for entry in report.skipped] == [("link", "symlink")]  # as from Docker's


def test_a_process_left_holding_the_agents_output_neither_delays_nor_enters_the_archives(gateway: Path,
                                                                                          tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    script = "(sleep 0.5; printf 'late'; sleep 5) & echo early > f.txt; echo early"
    done, took = run_collecting(gateway, tmp_path, script, ea.Collect([str(work)], BIG, 1000), work)
    assert done.returncode == 0, done.stderr
    assert took < 4  # the launcher did not wait for the child holding the pipe
    output, archives, broken = read_all(done.stdout, [str(work)])
    assert (output, broken, set(archives)) == (b"early\n", None, {str(work)})


@pytest.mark.parametrize(("max_bytes", "max_files"), [(BIG, 3), (4096, 1000)])
def test_past_a_cap_the_launcher_ends_the_archive_as_not_ok(gateway: Path, tmp_path: Path, max_bytes: int,
                                                            max_files: int):
    work = tmp_path / "work"
    work.mkdir()
    script = "for i in 1 2 3 4 5; do head -c 3000 /dev/urandom > f$i; done"
    done, _ = run_collecting(gateway, tmp_path, script, ea.Collect([str(work)], max_bytes, max_files), work)
    assert done.returncode == 0, done.stderr
    _, archives, broken = read_all(done.stdout, [str(work)])
    assert broken is None and archives == {}
    ends = [json.loads(line[ea.HEADER.size:]) for line in split_frames(done.stdout) if line[:1] == ea.END]
    assert len(ends) == 1 and not ends[0]["ok"] and "cap" in ends[0]["error"]


def split_frames(stream: bytes) -> list[bytes]:
    frames, at = [], 0
    while at < len(stream):
        _, size = ea.HEADER.unpack_from(stream, at)
        frames.append(stream[at:at + ea.HEADER.size + size])
        at += ea.HEADER.size + size
    return frames


@pytest.mark.parametrize("collect", [{"paths": ["relative"], "max_bytes": 1, "max_files": 1},
                                     {"paths": ["/w"], "max_bytes": 0, "max_files": 1}, []])
def test_a_go_line_with_a_bad_collect_starts_nothing(tmp_path: Path, collect: object):
    marker = tmp_path / "ran"
    line = json.dumps({"argv": ["--gateway-socket", "x", "--port", "0", "--prompt-file", "p", "--", "touch",
                                str(marker)], "env": {}, "cwd": None, "collect": collect}).encode() + b"\n"
    done = subprocess.run([sys.executable, "-I", str(LAUNCHER), standby.FLAG], input=line, capture_output=True,
                          timeout=60, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 125 and not marker.exists()
    assert done.stderr.decode().startswith("run_agent: the go line") and done.stdout == b""


def test_a_go_line_carries_what_to_collect():
    collect = ea.Collect(["/workspace", "/home/agent/.claude/projects"], 5, 6)
    go = standby.read(io.BytesIO(standby.encode([], {}, None, collect=collect.to_json())))
    assert go is not None and ea.Collect.from_json(go.collect) == collect
    assert standby.read(io.BytesIO(standby.encode([], {}, None))).collect is None  # type: ignore[union-attr]


# ---- never through a link (found by the second red team) -----------------------------------------


def archived(tmp_path: Path, path: Path) -> tuple[bytes, dict[str, ea.ExitArchive]]:
    """`ea.archive_one` of `path` in this process: the raw stream and the archives read back from it."""
    raw = tmp_path / "stream.bin"
    fd = os.open(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        ea.archive_one(str(path), ea.FramedOutput(fd), BIG, 1000)
    finally:
        os.close(fd)
    stream = raw.read_bytes()
    return stream, read_all(stream, [str(path)])[1]


@pytest.mark.parametrize("swap", ["file-for-link", "dir-for-link"])
def test_an_entry_swapped_between_the_look_and_the_open_is_never_read(tmp_path: Path, swap: str,
                                                                       monkeypatch: pytest.MonkeyPatch):
    """The red team swapped files for links to `/proc/self/status` while the launcher archived (with
    `renameat2(RENAME_EXCHANGE)` in a loop): tarfile looked with lstat and opened by name, so the
    collected "file" held the launcher's own status. Here the swap comes at exactly that moment."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET outside the tree\n")
    (work / "f.txt").write_text("the file\n")
    (work / "sub" / "in.txt").write_text("in the directory\n")
    real = ea.lstat_at

    def look_then_swap(dir_fd: int, name: str) -> os.stat_result:
        st = real(dir_fd, name)
        target = {"file-for-link": ("f.txt", outside / "secret.txt"), "dir-for-link": ("sub", outside)}[swap]
        if name == target[0]:
            victim = work / name
            if victim.is_dir():
                (work / "sub" / "in.txt").unlink()
                victim.rmdir()
            else:
                victim.unlink()
            victim.symlink_to(target[1])
        return st

    monkeypatch.setattr(ea, "lstat_at", look_then_swap)
    stream, archives = archived(tmp_path, work)
    assert archives == {} and b'"ok":false' in stream  # not ok: Docker's copy decides
    assert b"SECRET" not in stream


def test_a_path_reached_through_a_link_is_left_to_docker(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("a\n")
    (tmp_path / "link").symlink_to(real)
    stream, archives = archived(tmp_path, tmp_path / "link")
    assert archives == {} and b"a\n" not in stream
    stream, archives = archived(tmp_path, tmp_path / "link" / "deeper")  # a link on the way
    assert archives == {}


def test_sockets_are_left_out_and_fifos_are_never_opened(tmp_path: Path):
    import socket as socket_

    work = tmp_path / "w"
    work.mkdir()
    os.mkfifo(work / "pipe")  # opened, it would block the launcher for good
    with socket_.socket(socket_.AF_UNIX) as server:
        server.bind(str(work / "sock"))
        _, archives = archived(tmp_path, work)
    names = tarfile_names(archives[str(work)])
    assert names == ["w", "w/pipe"] or sorted(names) == ["w", "w/pipe"]


def tarfile_names(archive: ea.ExitArchive) -> list[str]:
    import tarfile

    assert archive.file is not None
    with tarfile.open(fileobj=archive.file, mode="r|") as tar:  # type: ignore[call-overload]
        return [member.name for member in tar]
