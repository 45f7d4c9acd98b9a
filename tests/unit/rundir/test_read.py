"""Opening a run directory: what is a run, which cases it has, which config it used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.rundir.read import (
    open_finished_run,
    read_bytes,
    read_jsonl,
)
from tests.unit.judges.rundir_fixture import make_run


def test_a_directory_without_run_files_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="not a run directory"):
        open_finished_run(tmp_path)
    with pytest.raises(RunDirError, match="no such run directory"):
        open_finished_run(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        open_finished_run(tmp_path / "file")


def test_run_json_alone_or_run_result_alone_make_a_run(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a/run.json").write_text('{"config_path": "/x/eval.yaml"}')
    assert open_finished_run(tmp_path / "a").config_path == Path("/x/eval.yaml")
    (tmp_path / "b").mkdir()
    (tmp_path / "b/run_result.json").write_text("not json {")
    run = open_finished_run(tmp_path / "b")
    assert run.config_path is None and run.problems and run.run_id == "b"


def test_case_ids_are_directories_and_per_case_entries(tmp_path: Path) -> None:
    root = make_run(tmp_path, None, {"b": {}, "a": {}})
    (root / "cases/.hidden").mkdir()
    result = json.loads((root / "run_result.json").read_text())
    result["per_case"] = {"c": {"exit_code": 1}, "../evil": {}, "a": {"exit_code": 0}}
    (root / "run_result.json").write_text(json.dumps(result))
    run = open_finished_run(root)
    assert run.case_ids == ["a", "b", "c"]
    assert run.outcome("c").exit_code == 1 and run.outcome("b") is None


def test_relative_config_path_resolves_against_the_run(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"config_path": "../eval.yaml", "run_id": "r1"}')
    run = open_finished_run(tmp_path)
    assert run.config_path == tmp_path.resolve() / "../eval.yaml" and run.run_id == "r1"


def test_readers_cap_and_tolerate(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 10)
    assert read_bytes(tmp_path / "big", cap=4) == (b"xxxx", True)
    assert read_bytes(tmp_path / "none") is None
    (tmp_path / "d.jsonl").write_text('{"a": 1}\nbroken\n[1]\n{"b": 2}\n')
    assert read_jsonl(tmp_path / "d.jsonl") == [{"a": 1}, {"b": 2}]
