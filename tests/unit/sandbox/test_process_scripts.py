"""The tool's own programs in a sandbox: run by the execute-only interpreter, and doing what the shell
commands they replace did (here on this machine's files, with this machine's python3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner import step_loop
from agent_eval_sandbox.runner.steps import parse_listing
from agent_eval_sandbox.sandbox import process_scripts as ps


def _run(script: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-I", "-S", "-c", script, *args], capture_output=True)


def test_each_runs_by_the_execute_only_interpreter_and_starts_nothing_else() -> None:
    assert ps.interpreter("x", "a")[:4] == [paths.PROTECTED_PYTHON, "-I", "-S", "-c"]
    assert step_loop.KILL_LEFTOVERS_ARGV[0] == step_loop.LISTING_ARGV[0] == paths.PROTECTED_PYTHON
    for script in (ps.KILL_LEFTOVERS, ps.LIST_FILES, ps.LOOK, ps.REMOVE, ps.KILLER, ps.STOP_ALL, ps.KILL_ALL):
        assert "subprocess" not in script and "exec" not in script and "system(" not in script


def test_the_listing_is_every_regular_file_at_any_depth_and_follows_no_link(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.txt").write_text("hi")
    (tmp_path / "empty").touch()
    (tmp_path / "link").symlink_to("/etc/passwd")
    (tmp_path / "dirlink").symlink_to(tmp_path / "a")
    os.mkfifo(tmp_path / "fifo")
    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(1100):  # deeper than Python's recursion limit
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(parent)
    os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    (tmp_path / "name\udcff").write_bytes(b"x")  # not UTF-8
    listed = _run(ps.LIST_FILES, str(tmp_path))
    # REMOVE takes the deep chain away as iteratively (shutil.rmtree, pytest's cleanup, cannot).
    removed = _run(ps.REMOVE, str(tmp_path / "d"))
    assert removed.returncode == 0 and not (tmp_path / "d").exists(), removed.stderr
    assert listed.returncode == 0, listed.stderr
    listing = parse_listing(listed.stdout)
    assert set(listing) == {"a/b/x.txt", "empty", "/".join(["d"] * 1100) + "/bottom", "name\udcff"}
    size, mtime = listing["a/b/x.txt"]
    assert size == 2 and mtime == "%d.%09d" % divmod((tmp_path / "a/b/x.txt").stat().st_mtime_ns, 10**9)


def test_the_look_says_what_stat_says_and_never_follows(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("data")
    (tmp_path / "e").touch()
    (tmp_path / "l").symlink_to(tmp_path / "f")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    (tmp_path / "d").mkdir()
    names = [str(tmp_path / n) for n in ("f", "e", "l", "gone", "d", "missing")]
    looked = _run(ps.LOOK, *names).stdout.decode()
    by_stat = subprocess.run(["sh", "-c", 'for f in "$@"; do if [ -e "$f" ] || [ -L "$f" ]; then '
                                          'stat -c "%F|%s|%n" -- "$f"; fi; done', "sh", *names],
                             capture_output=True, text=True).stdout
    assert looked == by_stat and looked.count("\n") == 5


def test_remove_takes_trees_and_links_but_not_what_they_point_to(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "precious").write_text("keep me")
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "f").write_text("x")
    (tmp_path / "tree" / "out").symlink_to(kept)
    (tmp_path / "link").symlink_to(kept)
    removed = _run(ps.REMOVE, str(tmp_path / "tree"), str(tmp_path / "link"), str(tmp_path / "missing"))
    assert removed.returncode == 0, removed.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"] and (kept / "precious").read_text() == "keep me"
    # What cannot go is said, and the exit is 1 (proc's files cannot be unlinked, not even by root).
    failed = _run(ps.REMOVE, "/proc/self/status")
    assert failed.returncode == 1 and failed.stderr.startswith(b"/proc/self/status: "), failed.stderr
