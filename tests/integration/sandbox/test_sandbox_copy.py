"""Copy in and out of a real sandbox; a hostile sandbox cannot write outside the destination."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import UnsafeArchiveError
from agent_eval_sandbox.sandbox.archive import extract_tar

pytestmark = pytest.mark.docker


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes | None]]:
    """path -> (kind, permission bits, content) of a tree, links not followed."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
        content = path.read_bytes() if kind == "file" else None
        out[str(path.relative_to(root))] = (kind, stat.S_IMODE(st.st_mode), content)
    return out


def test_round_trip_keeps_tree_modes_empties_and_unicode(make_sandbox, tmp_path: Path):
    src = tmp_path / "src"
    (src / "ünïcødé dir" / "deep" / "er").mkdir(parents=True)
    (src / "empty dir").mkdir()
    (src / "ünïcødé dir" / "deep" / "er" / "日本語.txt").write_text("こんにちは")
    (src / "empty.txt").write_bytes(b"")
    (src / "blob.bin").write_bytes(os.urandom(300_000))
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(src / "run.sh", 0o755)
    (src / "secret").write_text("s")
    os.chmod(src / "secret", 0o600)
    os.chmod(src / "empty dir", 0o750)

    sandbox = make_sandbox("roundtrip")
    copied = sandbox.copy_in(src, "/workspace")
    assert (copied.files, copied.skipped) == (5, ())
    owners = sandbox.exec(["sh", "-c", "find /workspace -mindepth 1 -printf '%u:%g\\n' | sort -u"])
    assert owners.stdout == b"agent:agent\n"
    assert sandbox.exec(["./run.sh"]).stdout == b"ran\n"

    out = tmp_path / "out"
    report = sandbox.copy_out("/workspace", out, max_bytes=10**7, max_files=1000)
    assert report.found and report.skipped == ()
    assert snapshot(out) == snapshot(src)


def test_copy_in_files_creates_missing_destinations(make_sandbox, tmp_path: Path):
    sandbox = make_sandbox("files")
    sandbox.copy_in_files({"settings.json": b"{}", "hooks/client.py": b"print(1)\n"}, "/workspace/.claude")
    listing = sandbox.exec(["find", "/workspace/.claude", "-printf", "%P %u %m\\n"]).stdout.decode().split("\n")
    assert sorted(filter(None, listing)) == sorted(
        [" agent 755", "hooks agent 755", "hooks/client.py agent 644", "settings.json agent 644"]
    )


def test_copy_out_of_a_single_file_and_of_nothing(make_sandbox, tmp_path: Path):
    sandbox = make_sandbox("single")
    sandbox.exec(["sh", "-c", "echo one > /workspace/one.txt"])
    report = sandbox.copy_out("/workspace/one.txt", tmp_path / "o", max_bytes=100, max_files=10)
    assert report.files == 1 and (tmp_path / "o" / "one.txt").read_text() == "one\n"
    assert sandbox.copy_out("/workspace/.hook-outputs", tmp_path / "n", max_bytes=100, max_files=10).found is False


def test_links_made_inside_are_not_followed_and_nothing_lands_outside(make_sandbox, tmp_path: Path):
    sandbox = make_sandbox("hostile")
    setup = sandbox.exec(
        [
            "sh",
            "-c",
            "cd /workspace && echo data > real && ln -s /etc/passwd passwd && ln -s / root "
            "&& ln -s ../../../../../../tmp escape && ln real hard && mkfifo pipe "
            "&& mkdir sub && ln -s .. sub/up",
        ]
    )
    assert setup.ok, setup.stderr
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    out = tmp_path / "out"
    report = sandbox.copy_out("/workspace", out, max_bytes=10**6, max_files=100)
    assert {(s.path, s.kind) for s in report.skipped} == {
        ("passwd", "symlink"),
        ("root", "symlink"),
        ("escape", "symlink"),
        ("sub/up", "symlink"),
        ("pipe", "fifo"),
    }
    # Docker archives the second name of a file as a hardlink to the first: both come out as files.
    assert snapshot(out) == {
        "hard": ("file", 0o644, b"data\n"),
        "real": ("file", 0o644, b"data\n"),
        "sub": ("dir", 0o755, None),
    }
    assert list(victim_dir.iterdir()) == []


def test_caps_stop_a_sandbox_that_fills_its_output(make_sandbox, tmp_path: Path):
    sandbox = make_sandbox("filler")
    sandbox.exec(
        ["sh", "-c", "cd /workspace && head -c 200000 /dev/zero > big && for i in $(seq 50); do : > f$i; done"]
    )
    with pytest.raises(UnsafeArchiveError, match="cap of 100000 bytes"):
        sandbox.copy_out("/workspace", tmp_path / "a", max_bytes=100_000, max_files=1000)
    with pytest.raises(UnsafeArchiveError, match="more than 20 entries"):
        sandbox.copy_out("/workspace", tmp_path / "b", max_bytes=10**7, max_files=20)


def test_a_crafted_tar_is_refused_and_writes_nothing_outside(make_sandbox, tmp_path: Path):
    # Docker only archives real files, so a sandbox cannot make it emit these
    # names; the extraction refuses them anyway, into a destination that a real
    # copy-out has just filled.
    sandbox = make_sandbox("crafted")
    sandbox.exec(["sh", "-c", "mkdir -p /workspace/d && echo ok > /workspace/d/f"])
    dest = tmp_path / "dest"
    sandbox.copy_out("/workspace", dest, max_bytes=10**6, max_files=100)
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "planted").symlink_to(outside)  # as if an earlier step had left a link there

    def crafted(*entries: tuple[str, bytes | str]) -> io.BytesIO:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, payload in entries:
                info = tarfile.TarInfo(name)
                if isinstance(payload, str):
                    info.type, info.linkname = tarfile.SYMTYPE, payload
                    tar.addfile(info)
                else:
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
        buf.seek(0)
        return buf

    for entries in (
        [("workspace/../../outside/x", b"evil")],
        [("/tmp/evil-absolute", b"evil")],
        [("workspace/planted/x", b"evil")],
    ):
        with pytest.raises(UnsafeArchiveError):
            extract_tar(crafted(*entries), dest, strip_top="workspace", max_bytes=10**6, max_files=100)
    report = extract_tar(
        crafted(("workspace/lnk", str(outside)), ("workspace/lnk/x", b"evil")),
        dest,
        strip_top="workspace",
        max_bytes=10**6,
        max_files=100,
    )
    assert [(s.path, s.kind) for s in report.skipped] == [("lnk", "symlink")]
    assert list(outside.iterdir()) == []
    assert not Path("/tmp/evil-absolute").exists()
    assert (dest / "d" / "f").read_text() == "ok\n"
