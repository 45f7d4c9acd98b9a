"""The `latest` link: moved atomically to the run started last; `latest` as a RUN_DIR argument."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.rundir.latest import eval_runs, point_latest, resolve_run_arg
from agent_eval_sandbox.rundir.layout import RunDir


def test_the_link_follows_the_run_started_last(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path, "my eval", "r1")
    point_latest(first)
    second = RunDir.create(tmp_path, "my eval", "r2")
    link = point_latest(second)
    assert link == tmp_path / "my-eval" / "latest"
    assert os.readlink(link) == "r2"  # relative: the runs directory can move
    assert resolve_run_arg(Path("latest"), tmp_path) == second.root.resolve()
    assert [p.name for p in (tmp_path / "my-eval").iterdir() if p.name.startswith(".")] == []  # no temp left


def test_latest_is_the_newest_link_across_evals(tmp_path: Path) -> None:
    a = RunDir.create(tmp_path, "a", "r1")
    b = RunDir.create(tmp_path, "b", "r1")
    point_latest(b)
    point_latest(a)
    os.utime(tmp_path / "b" / "latest", ns=(1, 1), follow_symlinks=False)
    assert resolve_run_arg(Path("latest"), tmp_path) == a.root.resolve()


def test_a_path_is_taken_as_given_and_no_run_is_one_line(tmp_path: Path) -> None:
    assert resolve_run_arg(Path("some/run"), tmp_path) == Path("some/run")
    with pytest.raises(UserError, match="no run to call 'latest'"):
        resolve_run_arg(Path("latest"), tmp_path)


def test_latest_is_no_run_id_and_no_run(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="reserved"):
        RunDir.create(tmp_path, "e", "latest")
    run = RunDir.create(tmp_path, "e", "r1")
    run.run_json.write_text("{}")
    point_latest(run)
    assert eval_runs(tmp_path) == [run.root]  # the link is not listed as a second run
