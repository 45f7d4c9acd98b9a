"""Held directories: swept once their maker is gone, never while it lives, never outside this tool's own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox import held_dirs
from agent_eval_sandbox.sandbox.held_dirs import HeldDir, lock_path_of, sweep_abandoned

MAKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from agent_eval_sandbox.sandbox.held_dirs import HeldDir
    held = HeldDir(Path(sys.argv[1]), "aes-t-")
    (held.path / "staged.txt").write_text("a file of the run")
    print(held.path, flush=True)
    time.sleep(600)
""")


def _killed_maker(base: Path) -> Path:
    """A process that made a held directory and was killed with SIGKILL: no exit handler ran."""
    proc = subprocess.Popen([sys.executable, "-c", MAKER, str(base)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    path = Path(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stdout.close()
    return path


def test_a_held_directory_is_kept_while_held_and_gone_with_its_lock_once_released(tmp_path):
    held = HeldDir(tmp_path, "aes-")
    (held.path / "file").write_text("x")
    assert held.path.parent == tmp_path and held.path.name.startswith("aes-")
    assert (held.path.stat().st_mode & 0o777) == 0o700
    assert lock_path_of(held.path).is_file()

    assert sweep_abandoned([tmp_path]) == []
    assert (held.path / "file").read_text() == "x"

    held.release()
    held.release()  # idempotent
    assert list(tmp_path.iterdir()) == []


def test_a_killed_makers_directory_is_swept(tmp_path):
    path = _killed_maker(tmp_path)
    assert (path / "staged.txt").exists() and lock_path_of(path).exists()

    assert sweep_abandoned([tmp_path, tmp_path]) == [path]  # a base given twice is swept once
    assert list(tmp_path.iterdir()) == []
    assert sweep_abandoned([tmp_path]) == []


def test_a_live_makers_directory_survives_a_sweep_from_another_process(tmp_path):
    held = HeldDir(tmp_path, "aes-ll-")
    sweeper = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path;"
         "from agent_eval_sandbox.sandbox.held_dirs import sweep_abandoned;"
         "print(sweep_abandoned([Path(sys.argv[1])]))", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )
    assert sweeper.stdout.strip() == "[]"
    assert held.path.is_dir()
    held.release()


def test_only_this_tools_own_names_and_no_symlinks_are_swept(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    base = tmp_path / "base"
    base.mkdir()
    # not this tool's name, though shaped like a held directory with a free lock
    (base / "other").mkdir()
    (base / "other.lock").write_text("")
    # this tool's name, its lock free, but the "directory" a symlink to elsewhere
    (base / "aes-link").symlink_to(outside)
    (base / "aes-link.lock").write_text("")
    # a lock that is itself a symlink
    (base / "aes-sym").mkdir()
    (base / "aes-sym.lock").symlink_to(tmp_path / "elsewhere.lock")
    (tmp_path / "elsewhere.lock").write_text("")

    swept = sweep_abandoned([base])

    assert swept == [base / "aes-link"]  # its stale lock goes; what the link points to stays
    assert (outside / "precious").read_text() == "keep"
    assert (base / "aes-link").is_symlink()
    assert (base / "other").is_dir() and (base / "aes-sym").is_dir()


def test_a_maker_whose_new_lock_a_sweeper_took_first_starts_over(tmp_path, monkeypatch):
    """The one race: the maker has made its lock file and not yet locked it when a sweeper comes."""
    real_flock = held_dirs.fcntl.flock
    raced: list[Path] = []

    def flock(fd: int, op: int) -> None:
        if not raced and op == held_dirs.fcntl.LOCK_EX:  # the maker's first lock, before it is taken
            raced.extend(sweep_abandoned([tmp_path]))
        real_flock(fd, op)

    monkeypatch.setattr(held_dirs.fcntl, "flock", flock)
    held = HeldDir(tmp_path, "aes-")

    assert len(raced) == 1 and raced[0] != held.path
    assert not raced[0].exists() and not lock_path_of(raced[0]).exists()
    assert held.path.is_dir()
    monkeypatch.setattr(held_dirs.fcntl, "flock", real_flock)
    assert sweep_abandoned([tmp_path]) == []  # the second try holds its lock
    held.release()
    assert list(tmp_path.iterdir()) == []


def test_a_prefix_outside_the_swept_names_is_refused(tmp_path):
    with pytest.raises(ValueError, match="prefix"):
        HeldDir(tmp_path, "tmp-")
