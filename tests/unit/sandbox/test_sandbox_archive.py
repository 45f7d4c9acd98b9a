"""Safe extraction of hostile tar streams, and the tars built for copy-in (no Docker)."""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import threading
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import CopyOutInterrupted, UnsafeArchiveError
from agent_eval_sandbox.sandbox.archive import (
    MAX_DEPTH,
    ChunkStream,
    extract_tar,
    safe_parts,
    tar_from_dir,
    tar_from_files,
)

BIG = 10**9


def build_tar(*members: tuple[str, str, object]) -> io.BytesIO:
    """Members as (name, kind, payload): kind is file|dir|symlink|hardlink|chr|fifo."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload if isinstance(payload, bytes) else str(payload).encode()
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "chr": tarfile.CHRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            info.mode = 0o755 if kind == "dir" else 0o644
            if kind in ("symlink", "hardlink"):
                info.linkname = str(payload)
            tar.addfile(info)
    buf.seek(0)
    return buf


def extract(buf: io.BytesIO, dest: Path, strip: str | None = None, **caps: int):
    return extract_tar(
        buf, dest, strip_top=strip, max_bytes=caps.get("max_bytes", BIG), max_files=caps.get("max_files", 10_000)
    )


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "dest"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "victim").write_text("original")
    return path


@pytest.mark.parametrize(
    "name",
    ["../evil", "a/../../evil", "/etc/evil", "workspace/../../evil", "ok/..", "/abs"],
)
def test_traversal_and_absolute_names_are_refused_naming_the_member(name, dest, outside):
    with pytest.raises(UnsafeArchiveError) as err:
        extract(build_tar(("fine.txt", "file", "x"), (name, "file", "evil")), dest)
    assert repr(name) in str(err.value)
    assert "\n" not in str(err.value)
    assert tree(outside) == ["victim"]
    assert not (dest.parent / "evil").exists()


def test_symlink_members_are_skipped_and_never_written_through(dest, outside):
    report = extract(
        build_tar(
            ("link", "symlink", str(outside)),
            ("link/victim", "file", "overwritten"),
            ("rel", "symlink", "../outside/victim"),
            ("rel", "file", "replaced"),
        ),
        dest,
    )
    assert (outside / "victim").read_text() == "original"
    assert not (dest / "link").is_symlink() and (dest / "link").is_dir()
    assert (dest / "link" / "victim").read_text() == "overwritten"
    assert not (dest / "rel").is_symlink()
    assert {(s.path, s.kind, s.detail) for s in report.skipped} == {
        ("link", "symlink", str(outside)),
        ("rel", "symlink", "../outside/victim"),
    }
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_a_symlinked_directory_already_in_dest_is_refused(dest, outside):
    dest.mkdir()
    (dest / "out").symlink_to(outside)
    with pytest.raises(UnsafeArchiveError, match="'out/new'.*link"):
        extract(build_tar(("out/new", "file", "evil")), dest)
    assert tree(outside) == ["victim"]


def test_a_symlink_or_hardlink_leaf_in_dest_is_replaced_not_written_through(dest, outside):
    dest.mkdir()
    (dest / "soft").symlink_to(outside / "victim")
    os.link(outside / "victim", dest / "hard")
    extract(build_tar(("soft", "file", "new-soft"), ("hard", "file", "new-hard")), dest)
    assert (outside / "victim").read_text() == "original"
    assert (dest / "soft").read_text() == "new-soft" and not (dest / "soft").is_symlink()
    assert (dest / "hard").read_text() == "new-hard"


def test_devices_fifos_and_foreign_hardlinks_are_skipped(dest, outside):
    report = extract(
        build_tar(
            ("a.txt", "file", "a"),
            ("out", "hardlink", str(outside / "victim")),
            ("up", "hardlink", "../outside/victim"),
            ("later", "hardlink", "b.txt"),  # its target is not (yet) extracted
            ("b.txt", "file", "b"),
            ("null", "chr", None),
            ("pipe", "fifo", None),
        ),
        dest,
    )
    assert tree(dest) == ["a.txt", "b.txt"]
    assert sorted((s.path, s.kind) for s in report.skipped) == [
        ("later", "hardlink"),
        ("null", "device"),
        ("out", "hardlink"),
        ("pipe", "fifo"),
        ("up", "hardlink"),
    ]
    assert (outside / "victim").read_text() == "original"


def test_a_hardlink_to_an_extracted_file_becomes_an_independent_copy(dest):
    report = extract(
        build_tar(("workspace/d/first", "file", "shared"), ("workspace/second", "hardlink", "workspace/d/first")),
        dest,
        strip="workspace",
    )
    assert (dest / "second").read_text() == "shared"
    assert os.stat(dest / "second").st_ino != os.stat(dest / "d" / "first").st_ino
    assert (report.files, report.bytes, report.skipped) == (2, 12, ())


def test_hardlink_copies_count_against_the_byte_cap(dest):
    members = [("big", "file", "x" * 60)] + [(f"l{i}", "hardlink", "big") for i in range(3)]
    with pytest.raises(UnsafeArchiveError, match="cap of 100 bytes.*'l0'"):
        extract(build_tar(*members), dest, max_bytes=100)


def test_the_byte_cap_stops_extraction_with_a_clear_error(dest):
    with pytest.raises(UnsafeArchiveError, match=r"cap of 10 bytes.*'b'"):
        extract(build_tar(("a", "file", "12345"), ("b", "file", "123456")), dest, max_bytes=10)
    assert tree(dest) == ["a"]


def test_the_entry_cap_stops_extraction_with_a_clear_error(dest):
    members = [(f"f{i}", "file", "") for i in range(6)]
    with pytest.raises(UnsafeArchiveError, match="more than 5 entries"):
        extract(build_tar(*members), dest, max_files=5)


class _StopAfter(io.RawIOBase):
    """A stream that sets `stop` once `after` bytes of it were read: an interrupt mid copy-out."""

    def __init__(self, data: bytes, after: int, stop: threading.Event) -> None:
        self._data, self._after, self._stop, self._pos = data, after, stop, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        chunk = self._data[self._pos:self._pos + min(len(buffer), 512)]
        buffer[:len(chunk)] = chunk
        self._pos += len(chunk)
        if self._pos >= self._after:
            self._stop.set()
        return len(chunk)


def test_a_stop_set_mid_stream_ends_the_extraction_at_the_next_entry(dest):
    members = [(f"f{i}", "file", "x") for i in range(200)]
    data = build_tar(*members).getvalue()
    stop = threading.Event()
    with pytest.raises(CopyOutInterrupted, match="interrupted"):
        extract_tar(_StopAfter(data, len(data) // 4, stop), dest, strip_top=None, max_bytes=BIG, max_files=BIG,
                    stop=stop)
    assert 0 < len(tree(dest)) < 100  # what came before the stop is there; the rest was never read
    # Without a stop, the same stream is whole.
    report = extract_tar(io.BytesIO(data), dest / "whole", strip_top=None, max_bytes=BIG, max_files=BIG,
                         stop=threading.Event())
    assert report.files == 200


def test_a_stop_set_inside_one_big_file_ends_the_extraction_within_it(dest):
    data = build_tar(("big", "file", b"x" * (8 * 1024 * 1024))).getvalue()
    stop = threading.Event()
    with pytest.raises(CopyOutInterrupted, match="after 1 entries"):
        extract_tar(_StopAfter(data, 2 * 1024 * 1024, stop), dest, strip_top=None, max_bytes=BIG, max_files=BIG,
                    stop=stop)
    assert (dest / "big").stat().st_size < 8 * 1024 * 1024


def test_docker_top_directory_is_stripped_and_others_refused(dest):
    report = extract(
        build_tar(("workspace", "dir", None), ("workspace/sub", "dir", None), ("workspace/sub/x", "file", "x")),
        dest,
        strip="workspace",
    )
    assert tree(dest) == ["sub", "sub/x"]
    assert (report.files, report.dirs, report.bytes) == (1, 1, 1)
    with pytest.raises(UnsafeArchiveError, match="outside the expected top directory 'workspace/'"):
        extract(build_tar(("other/x", "file", "x")), dest, strip="workspace")


def test_modes_are_kept_without_setuid_and_readonly_dirs_still_fill(dest):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        d = tarfile.TarInfo("ro")
        d.type, d.mode = tarfile.DIRTYPE, 0o555
        tar.addfile(d)
        for name, mode in (("ro/file", 0o640), ("suid", 0o4755)):
            f = tarfile.TarInfo(name)
            f.size, f.mode, f.mtime = 1, mode, 1_000_000
            tar.addfile(f, io.BytesIO(b"x"))
    buf.seek(0)
    extract(buf, dest)
    assert stat.S_IMODE((dest / "ro").stat().st_mode) == 0o755  # owner keeps rwx to manage results
    assert stat.S_IMODE((dest / "ro" / "file").stat().st_mode) == 0o640
    assert stat.S_IMODE((dest / "suid").stat().st_mode) == 0o755
    assert (dest / "suid").stat().st_mtime == 1_000_000


def test_garbage_is_not_a_tar(dest):
    with pytest.raises(UnsafeArchiveError, match="not a valid tar"):
        extract(io.BytesIO(b"\x00garbage" * 200), dest)


def test_a_file_member_cannot_replace_a_directory(dest):
    with pytest.raises(UnsafeArchiveError, match="replace a directory"):
        extract(build_tar(("d", "dir", None), ("d", "file", "x")), dest)


def test_safe_parts_normalises_harmless_forms():
    assert safe_parts("./a//b/./c") == ("a", "b", "c")
    assert safe_parts("workspace/", "workspace") == ()
    assert safe_parts("a..b/..c") == ("a..b", "..c")


def test_chunk_stream_reads_across_chunk_boundaries():
    stream = io.BufferedReader(ChunkStream([b"ab", b"", b"cde", b"f"]), buffer_size=2)
    assert stream.read(3) == b"abc"
    assert stream.read() == b"def"


# ---- copy-in tars ---------------------------------------------------------------------


def test_tar_from_dir_keeps_inner_links_skips_escaping_ones_and_never_follows(tmp_path: Path, outside):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "data.txt").write_text("data")
    os.chmod(src / "sub" / "data.txt", 0o600)
    (src / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o755)
    (src / "empty").write_bytes(b"")
    (src / "inner").symlink_to("sub/data.txt")
    (src / "up").symlink_to("../outside/victim")
    (src / "dotdot").symlink_to("sub/../sub/data.txt")
    (src / "abs").symlink_to(outside / "victim")
    (src / "outdir").symlink_to(outside)  # a followed walk would copy the victim
    os.link(src / "sub" / "data.txt", src / "hard")
    os.mkfifo(src / "pipe")

    buf = io.BytesIO()
    summary = tar_from_dir(src, buf, uid=1000, gid=1000)
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"sub", "sub/data.txt", "run.sh", "empty", "inner", "hard"}
    assert all((m.uid, m.gid) == (1000, 1000) for m in members.values())
    assert members["inner"].issym() and members["inner"].linkname == "sub/data.txt"
    assert members["hard"].isreg() and members["hard"].size == 4
    assert members["run.sh"].mode == 0o755 and members["sub/data.txt"].mode == 0o600
    assert sorted((s.path, s.kind) for s in summary.skipped) == [
        ("abs", "symlink"),
        ("dotdot", "symlink"),
        ("outdir", "symlink"),
        ("pipe", "fifo"),
        ("up", "symlink"),
    ]
    assert (summary.files, summary.bytes) == (4, 4 + 10 + 0 + 4)


def test_tar_from_files_adds_parents_owned_by_the_user_and_refuses_escapes():
    buf = io.BytesIO()
    tar_from_files({"a/b/c.txt": b"c", "top": b"t"}, buf, uid=1000, gid=1001, mode=0o600)
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"a", "a/b", "a/b/c.txt", "top"}
    assert members["a"].isdir() and (members["a"].uid, members["a"].gid) == (1000, 1001)
    assert members["a/b/c.txt"].mode == 0o600
    with pytest.raises(UnsafeArchiveError):
        tar_from_files({"../x": b""}, io.BytesIO(), uid=1000, gid=1000)
    with pytest.raises(UnsafeArchiveError):
        tar_from_files({"/etc/x": b""}, io.BytesIO(), uid=1000, gid=1000)


def test_round_trip_through_both_sides(tmp_path: Path):
    src = tmp_path / "src"
    (src / "ünï cødé" / "deep" / "er").mkdir(parents=True)
    (src / "ünï cødé" / "deep" / "er" / "f.bin").write_bytes(bytes(range(256)) * 100)
    (src / "empty").write_bytes(b"")
    buf = io.BytesIO()
    tar_from_dir(src, buf, uid=os.getuid(), gid=os.getgid())
    buf.seek(0)
    out = tmp_path / "out"
    report = extract(buf, out)
    assert tree(out) == tree(src)
    assert (out / "ünï cødé" / "deep" / "er" / "f.bin").read_bytes() == bytes(range(256)) * 100
    assert report.files == 2


def test_tar_from_dir_leaves_out_excluded_paths_with_their_subtrees(tmp_path: Path):
    src = tmp_path / "src"
    (src / "eval" / "answers").mkdir(parents=True)
    (src / "eval" / "answers" / "key.yaml").write_text("answer: 42")
    (src / "eval" / "public.txt").write_text("ok")
    (src / "code.py").write_text("x = 1")
    buf = io.BytesIO()
    summary = tar_from_dir(src, buf, uid=1000, gid=1000, exclude=lambda rel: rel == "eval/answers")
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        assert sorted(tar.getnames()) == ["code.py", "eval", "eval/public.txt"]
    assert [(s.path, s.kind) for s in summary.skipped] == [("eval/answers", "excluded")]


def test_git_metadata_is_never_extracted_at_any_depth(dest):
    """A host `git` over the collected copy would run what a planted config names."""
    buf = build_tar(
        ("workspace", "dir", None),
        ("workspace/.git", "dir", None),
        ("workspace/.git/config", "file", "[core]\n\tfsmonitor = touch /tmp/pwned\n"),
        ("workspace/.git/hooks/post-index-change", "file", "#!/bin/sh\n"),
        ("workspace/sub/.git", "file", "gitdir: ../real\n"),
        ("workspace/mac/.GIT/config", "file", "x"),
        ("workspace/hfs/.g\u200cit/config", "file", "x"),
        ("workspace/ntfs/.git./config", "file", "x"),
        ("workspace/short/GIT~1/config", "file", "x"),
        ("workspace/keep/.gitignore", "file", "*.log\n"),
        ("workspace/keep/.github/workflow.yml", "file", "on: push\n"),
        ("workspace/keep/f", "hardlink", "workspace/.git/config"),
    )
    report = extract(buf, dest, strip="workspace")
    assert tree(dest) == ["keep", "keep/.github", "keep/.github/workflow.yml", "keep/.gitignore"]
    git = sorted(s.path for s in report.skipped if s.kind == "git")
    assert git == [".git", "hfs/.g\u200cit", "mac/.GIT", "ntfs/.git.", "short/GIT~1", "sub/.git"]
    # a hardlink to a git file has nothing extracted to copy from
    assert [s.path for s in report.skipped if s.kind == "hardlink"] == ["keep/f"]


def test_nothing_deeper_than_the_depth_cap_is_extracted(dest):
    """An agent's 1,500-level tree would break the host's recursive tools (rmtree, copytree): it is cut
    at MAX_DEPTH, reported once, and the rest of the archive is extracted as usual."""
    deep = "/".join(["ab"] * 1500)
    members = [("workspace", "dir", None)]
    members += [("workspace/" + "/".join(["ab"] * n), "dir", None) for n in range(1, 1501)]
    members += [(f"workspace/{deep}/leaf.txt", "file", "x"), ("workspace/out/answer.txt", "file", "42")]
    report = extract(build_tar(*members), dest, strip="workspace")
    assert (dest / "out" / "answer.txt").read_text() == "42"
    depths = [len(p.relative_to(dest).parts) for p in dest.rglob("*")]
    assert max(depths) == MAX_DEPTH
    deep_skips = [s for s in report.skipped if s.kind == "too_deep"]
    assert [s.path for s in deep_skips] == ["/".join(["ab"] * MAX_DEPTH)]
    shutil.rmtree(dest)  # the host's recursive tools cope with what was extracted
