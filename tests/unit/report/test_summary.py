"""summary.yaml/json: shape, round trip, run metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.report.summary import (
    compute_run_metrics,
    load_summary,
    write_summary,
)
from agent_eval_sandbox.rundir.layout import RunDir
from tests.unit.report.summary_fixture import HOSTILE_CASE, make_summary


def test_the_reference_shape() -> None:
    data = make_summary().to_data()
    assert list(data)[:4] == ["run_id", "judges", "per_case", "run_metrics"]
    correct = data["judges"]["correct"]
    assert correct["pass_rate"] == 0.5 and correct["mean"] == 0.5
    assert (correct["scored_cases"], correct["errored_cases"], correct["skipped_cases"], correct["total_cases"]) == (2, 0, 1, 3)
    quality = data["judges"]["quality"]
    assert quality["mean"] == 3.5 and quality["pass_rate"] is None and quality["score_range"] == [1.0, 5.0]
    assert quality["stability"] == {"samples": 3, "stable_cases": 0, "total_cases": 1}
    entry = data["per_case"][HOSTILE_CASE]["quality"]
    assert entry["value"] is None and entry["status"] == "error" and "outside its declared" in entry["error"]
    assert data["per_case"]["case-1"]["correct"] == {"value": True, "rationale": "all good", "judge_type": "check", "status": "scored"}
    assert data["thresholds"]["passed"] is False
    assert data["thresholds"]["regressions"] == ["[correct] pass_rate: >= 0.9 -> 0.5", "[quality] mean: >= 4.0 -> 3.5"]
    assert data["thresholds"]["config"] == {"correct": {"min_pass_rate": 0.9}, "quality": {"min_mean": 4.0}}


def test_files_round_trip(tmp_path: Path) -> None:
    summary = make_summary()
    yaml_path, json_path = write_summary(RunDir(tmp_path), summary)
    assert yaml.safe_load(yaml_path.read_text()) == json.loads(json_path.read_text())
    assert load_summary(RunDir(tmp_path)) == summary
    json_path.unlink()
    assert load_summary(RunDir(tmp_path)) == summary  # summary.yaml as the fallback


def test_missing_or_foreign_summaries_are_run_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="has not been judged yet"):
        load_summary(RunDir(tmp_path))
    (tmp_path / "summary.json").write_text('{"judges": {}}')
    with pytest.raises(RunDirError, match="not a summary this tool wrote"):
        load_summary(RunDir(tmp_path))
    (tmp_path / "summary.json").write_text("{broken")
    with pytest.raises(RunDirError, match="invalid JSON"):
        load_summary(RunDir(tmp_path))


def test_run_metrics_accept_both_token_namings() -> None:
    reference = {"cost_usd": 1.0, "num_turns": 4, "token_usage": {"input": 100, "output": 100, "cache_read": 700, "cache_create": 100}}
    api = {"cost_usd": 1.0, "num_turns": 4, "token_usage": {"input_tokens": 100, "output_tokens": 100,
                                                            "cache_read_input_tokens": 700, "cache_creation_input_tokens": 100}}
    expected = {"cost_per_turn_usd": 0.25, "output_tokens_per_turn": 25.0, "cache_hit_rate": 0.777778, "cost_per_mtok_usd": 1000.0}
    assert compute_run_metrics(reference) == expected == compute_run_metrics(api)
    assert compute_run_metrics({}) is None
    assert compute_run_metrics({"cost_usd": True, "num_turns": 0, "token_usage": "x"}) is None
