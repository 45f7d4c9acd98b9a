"""`gc`'s sweep of the host: where it looks, and that a lost current directory does not stop it."""

from __future__ import annotations

import tempfile

from agent_eval_sandbox import cli
from agent_eval_sandbox.sandbox.held_dirs import LOCK_MARK, lock_path_of


def _abandoned(base, name):
    path = base / name
    path.mkdir(parents=True)
    lock_path_of(path).write_bytes(LOCK_MARK)
    return path


def test_gc_sweeps_the_temp_runs_and_shared_directories(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    in_tmp = _abandoned(tmp_path / "tmp", "aes-ll-0000aaaa")
    in_runs = _abandoned(tmp_path / "runs", "aes-1111bbbb")
    in_shared = _abandoned(tmp_path / "shared", "aesj-2222cccc")
    monkeypatch.chdir(tmp_path)

    removed = cli._sweep_host_dirs("runs", tmp_path / "shared")

    assert sorted(r.name for r in removed) == sorted(str(p) for p in (in_tmp, in_runs, in_shared))
    assert {(r.kind, r.reason) for r in removed} == {("directory", "the process that made it is gone")}


def test_gc_sweeps_the_temp_directory_when_the_current_one_is_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("AGENT_EVAL_RUNS_DIR", raising=False)
    left = _abandoned(tmp_path, "aes-3333dddd")
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()

    assert [r.name for r in cli._sweep_host_dirs(None, None)] == [str(left)]
