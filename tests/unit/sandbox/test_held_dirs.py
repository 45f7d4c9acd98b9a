"""Held entries: swept once their maker is gone, never while it lives, never anything not provably this tool's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox import held_dirs
from agent_eval_sandbox.sandbox.held_dirs import LOCK_MARK, HeldDir, HeldSymlink, lock_path_of, sweep_abandoned

MAKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from agent_eval_sandbox.sandbox.held_dirs import HeldDir, HeldSymlink
    base = Path(sys.argv[1])
    held = HeldDir(base, "aes-t-")
    (held.path / "staged.txt").write_text("a file of the run")
    alias = HeldSymlink(base, "aes-r-", Path(sys.argv[2]))
    print(held.path, alias.path, flush=True)
    time.sleep(600)
""")


def _killed_maker(base: Path, target: Path) -> tuple[Path, Path]:
    """A process that made a held directory and symlink and was killed with SIGKILL: no exit handler ran."""
    proc = subprocess.Popen([sys.executable, "-c", MAKER, str(base), str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    made, alias = proc.stdout.readline().split()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stdout.close()
    return Path(made), Path(alias)


def _marked_lock(path: Path) -> None:
    lock_path_of(path).write_bytes(LOCK_MARK)


def test_a_held_directory_is_kept_while_held_and_gone_with_its_lock_once_released(tmp_path):
    held = HeldDir(tmp_path, "aes-")
    (held.path / "file").write_text("x")
    assert held.path.parent == tmp_path and held.path.name.startswith("aes-") and len(held.path.name) == 12
    assert (held.path.stat().st_mode & 0o777) == 0o700
    assert lock_path_of(held.path).read_bytes() == LOCK_MARK

    assert sweep_abandoned([tmp_path]) == []
    assert (held.path / "file").read_text() == "x"

    held.release()
    held.release()  # idempotent
    assert list(tmp_path.iterdir()) == []
    with HeldDir(tmp_path, "aes-git-home-") as home:
        assert home.path.is_dir()
    assert list(tmp_path.iterdir()) == []

    target = tmp_path.parent / f"{tmp_path.name}-target"
    target.mkdir()
    with HeldSymlink(tmp_path, "aes-r-", target) as alias:
        assert alias.path.resolve() == target and sweep_abandoned([tmp_path]) == []
    assert list(tmp_path.iterdir()) == [] and target.is_dir()


def _kept_and_base(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of the user's holding a file no sweep may touch, and a base to sweep."""
    kept, base = tmp_path / "kept", tmp_path / "base"
    kept.mkdir()
    (kept / "precious").write_text("keep")
    base.mkdir()
    return kept, base


def test_a_killed_makers_directory_and_symlink_are_swept_and_the_link_target_kept(tmp_path):
    target, base = _kept_and_base(tmp_path)
    made, alias = _killed_maker(base, target)
    assert (made / "staged.txt").exists() and alias.is_symlink() and lock_path_of(made).exists()
    (made / "planted").symlink_to(target)  # what a sandbox could leave in a directory it had mounted

    assert sorted(sweep_abandoned([base, base])) == sorted([made, alias])  # a base given twice is swept once
    assert list(base.iterdir()) == []
    assert (target / "precious").read_text() == "keep"
    assert sweep_abandoned([base]) == []


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


def test_nothing_but_this_tools_own_marked_entries_is_swept(tmp_path):
    outside, base = _kept_and_base(tmp_path)
    # an eval named like this tool's entries, locked by someone's own flock wrapper (no mark)
    (base / "aes-gcm-review").mkdir()
    (base / "aes-gcm-review" / "run.json").write_text("{}")
    (base / "aes-gcm-review.lock").write_text("")
    # a file that merely ends in .lock
    (base / "aes.lock").write_text("keep")
    # the right shape of name, but a lock of other content
    (base / "aes-0123abcd").mkdir()
    (base / "aes-0123abcd.lock").write_bytes(b"x" * len(LOCK_MARK))
    # a marked lock that is itself a symlink
    (base / "aes-ll-0123abcd").mkdir()
    (tmp_path / "elsewhere.lock").write_bytes(LOCK_MARK)
    lock_path_of(base / "aes-ll-0123abcd").symlink_to(tmp_path / "elsewhere.lock")
    # a marked lock beside a symlink to a directory of the user's: the link goes, never what it points to
    (base / "aes-r-0123abcd").symlink_to(outside)
    _marked_lock(base / "aes-r-0123abcd")
    before = sorted(p.name for p in base.iterdir())

    assert sweep_abandoned([base]) == [base / "aes-r-0123abcd"]

    assert (outside / "precious").read_text() == "keep"
    assert sorted(p.name for p in base.iterdir()) == sorted(set(before) - {"aes-r-0123abcd", "aes-r-0123abcd.lock"})
    assert (base / "aes-gcm-review" / "run.json").exists() and (base / "aes.lock").read_text() == "keep"


def test_a_lock_not_yet_marked_is_never_taken_and_a_lock_without_its_entry_goes_quietly(tmp_path):
    # a maker between making its lock and marking it (or killed there): nothing of it is touched
    (tmp_path / "aes-0000aaaa").mkdir()
    lock_path_of(tmp_path / "aes-0000aaaa").write_bytes(b"")
    # a maker killed between marking its lock and making its directory: the lock goes, nothing is reported
    _marked_lock(tmp_path / "aes-1111bbbb")

    assert sweep_abandoned([tmp_path]) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aes-0000aaaa", "aes-0000aaaa.lock"]


def test_a_sweep_cut_short_leaves_the_lock_for_the_next(tmp_path, monkeypatch):
    made = tmp_path / "aes-2222cccc"
    made.mkdir()
    for i in range(5):
        (made / f"f{i}").write_text("x")
    _marked_lock(made)
    real_rmtree = held_dirs.shutil.rmtree

    def interrupted(path, ignore_errors=False, dir_fd=None):
        next((tmp_path / path).iterdir()).unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(held_dirs.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep_abandoned([tmp_path])
    assert lock_path_of(made).read_bytes() == LOCK_MARK and len(list(made.iterdir())) == 4

    monkeypatch.setattr(held_dirs.shutil, "rmtree", real_rmtree)
    assert sweep_abandoned([tmp_path]) == [made]
    assert list(tmp_path.iterdir()) == []


def test_a_name_taken_without_a_lock_is_passed_over(tmp_path, monkeypatch):
    names = iter(["0badf00d", "0badf00d", "c0ffee00"])
    monkeypatch.setattr(held_dirs.secrets, "token_hex", lambda n: next(names))
    (tmp_path / "aes-0badf00d").mkdir()  # someone's, with no lock
    held = HeldDir(tmp_path, "aes-")
    assert held.path.name == "aes-c0ffee00"
    assert not lock_path_of(tmp_path / "aes-0badf00d").exists()
    held.release()
    assert [p.name for p in tmp_path.iterdir()] == ["aes-0badf00d"]


def test_unreadable_bases_are_passed_over(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert sweep_abandoned([tmp_path / "missing", loop]) == []


def test_a_prefix_outside_the_swept_names_is_refused(tmp_path):
    with pytest.raises(ValueError, match="prefix"):
        HeldDir(tmp_path, "tmp-")
    with pytest.raises(ValueError, match="prefix"):
        HeldDir(tmp_path, "aes_")


def test_a_path_flipped_between_the_lock_and_the_removal_cannot_send_the_removal_elsewhere(tmp_path, monkeypatch):
    """Someone who controls a directory on the swept path plants an abandoned marked lock under the name of
    a live entry elsewhere and flips the path to there once the lock is taken: the removal stays where the
    lock was, because the base is opened once."""
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    theirs.mkdir()
    ours.mkdir()
    live = HeldDir(ours, "aes-ll-")
    (live.path / "lifeline.sock").write_text("")
    _marked_lock(theirs / live.path.name)  # a killed run's lock, renamed to the live entry's name
    link = tmp_path / "runs"
    link.symlink_to(theirs)
    real_flock = held_dirs.fcntl.flock

    def flock_then_flip(fd: int, op: int) -> None:
        real_flock(fd, op)
        if op & held_dirs.fcntl.LOCK_NB:
            link.unlink()
            link.symlink_to(ours)

    monkeypatch.setattr(held_dirs.fcntl, "flock", flock_then_flip)
    assert sweep_abandoned([link]) == []
    assert (live.path / "lifeline.sock").exists() and lock_path_of(live.path).exists()
    live.release()


def test_a_name_someone_else_took_after_the_removal_does_not_keep_the_lock_forever(tmp_path, monkeypatch):
    made = tmp_path / "aes-3333dddd"
    made.mkdir()
    _marked_lock(made)
    real_rmtree = held_dirs.shutil.rmtree

    def removed_then_squatted(path, ignore_errors=False, dir_fd=None):
        real_rmtree(path, ignore_errors=ignore_errors, dir_fd=dir_fd)
        made.mkdir()
        os.chown(made, 65534, 65534)  # another user's directory under the name, in a shared sticky directory

    monkeypatch.setattr(held_dirs.shutil, "rmtree", removed_then_squatted)
    assert sweep_abandoned([tmp_path]) == [made]
    assert not lock_path_of(made).exists() and made.stat().st_uid == 65534  # theirs stays, our lock goes


def test_an_entry_its_maker_could_not_remove_is_left_for_a_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(held_dirs.shutil, "rmtree", lambda *args, **kwargs: None)  # e.g. a busy mount below it
    held = HeldDir(tmp_path, "aes-")
    (held.path / "f").write_text("x")
    held.release()
    assert (held.path / "f").exists() and lock_path_of(held.path).read_bytes() == LOCK_MARK
    monkeypatch.undo()
    assert sweep_abandoned([tmp_path]) == [held.path]
    assert list(tmp_path.iterdir()) == []


CLAIMER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from agent_eval_sandbox.sandbox.held_dirs import HeldDir
    base = Path(sys.argv[1])
    print("ready", flush=True)
    while True:
        HeldDir(base, "aes-k-").release()
""")


def test_makers_killed_at_random_points_leave_nothing_a_sweep_keeps(tmp_path):
    """With the lock made unnamed, marked and only then linked in, no kill leaves an empty lock behind
    (red team round 9: 11 % of random kills did, with the lock made under its name first)."""
    base = tmp_path / "base"
    base.mkdir()
    for delay in [i % 10 / 1000 for i in range(40)]:
        proc = subprocess.Popen([sys.executable, "-c", CLAIMER, str(base)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
    sweep_abandoned([base])
    left = {p.name: (p.stat().st_size, p.read_bytes()[:20]) for p in base.iterdir()}
    assert left == {}


def test_without_unnamed_files_a_lock_is_made_under_its_name_and_still_marked(tmp_path, monkeypatch):
    monkeypatch.delattr(held_dirs.os, "O_TMPFILE", raising=False)
    held = HeldDir(tmp_path, "aes-")
    assert lock_path_of(held.path).read_bytes() == LOCK_MARK
    assert sweep_abandoned([tmp_path]) == [] and held.path.is_dir()
    held.release()
    assert list(tmp_path.iterdir()) == []


def test_a_name_whose_lock_exists_is_passed_over_and_the_lock_left_alone(tmp_path, monkeypatch):
    names = iter(["0badf00d", "c0ffee00"])
    monkeypatch.setattr(held_dirs.secrets, "token_hex", lambda n: next(names))
    lock_path_of(tmp_path / "aes-0badf00d").write_bytes(b"someone's")
    held = HeldDir(tmp_path, "aes-")
    assert held.path.name == "aes-c0ffee00"
    assert lock_path_of(tmp_path / "aes-0badf00d").read_bytes() == b"someone's"
    held.release()
    assert [p.name for p in tmp_path.iterdir()] == ["aes-0badf00d.lock"]


def test_on_linux_temp_directories_the_lock_appears_marked_and_held(tmp_path):
    # ext4 and tmpfs (the temp directories of the dev VMs and CI) make unnamed files.
    path = tmp_path / "aes-0000dddd"
    fd = held_dirs._claim_unnamed(path)
    assert fd is not None
    assert lock_path_of(path).read_bytes() == LOCK_MARK and sweep_abandoned([tmp_path]) == []
    os.close(fd)
    assert list(tmp_path.iterdir()) == [lock_path_of(path)]
    sweep_abandoned([tmp_path])  # a lock without its entry goes quietly
    assert list(tmp_path.iterdir()) == []


def test_the_mark_is_on_the_disk_before_the_lock_has_a_name(tmp_path, monkeypatch):
    """Red team round 10, B1: after a power cut ext4 kept the link and not the data, an empty lock."""
    calls: list[str] = []
    real_fsync, real_link = held_dirs.os.fsync, held_dirs.os.link

    def fsync(fd):
        calls.append(f"fsync {os.pread(fd, len(LOCK_MARK), 0) == LOCK_MARK}")
        real_fsync(fd)

    def link(src, dst, **kwargs):
        calls.append("link")
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(held_dirs.os, "fsync", fsync)
    monkeypatch.setattr(held_dirs.os, "link", link)
    held = HeldDir(tmp_path, "aes-")
    assert calls == ["fsync True", "link"]
    held.release()


FSIZE_MAKER = textwrap.dedent("""
    import resource, sys
    from pathlib import Path
    from agent_eval_sandbox.sandbox.held_dirs import HeldDir
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))  # as a batch system's `ulimit -f` would
    try:
        HeldDir(Path(sys.argv[1]), "aes-t-")
    except OSError as exc:
        print("refused:", exc)
    else:
        print("made")
""")


def test_a_mark_written_in_part_is_an_error_not_a_lock_no_sweep_takes(tmp_path):
    """Red team round 10, B3: with 16 of its 70 bytes written, the entry was made, and after a kill it
    stayed for good."""
    made = subprocess.run([sys.executable, "-c", FSIZE_MAKER, str(tmp_path)], capture_output=True, text=True,
                          check=True, timeout=60)
    assert made.stdout.startswith("refused:") and "lock mark" in made.stdout, made.stdout + made.stderr
    assert list(tmp_path.iterdir()) == []
