"""`report RUN_DIR`: rebuilding every report from stored judge results, without judging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.report.build import build_reports
from agent_eval_sandbox.report.facts import read_case_view
from agent_eval_sandbox.report.summary import write_summary
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.read import open_finished_run
from tests.unit.judges.rundir_fixture import case_result, make_run
from tests.unit.report.summary_fixture import HOSTILE_CASE, make_summary


def _run_with_summary(tmp_path: Path) -> Path:
    root = make_run(tmp_path, None, {
        "case-1": {"run_result.json": case_result(cost_usd=0.5), "transcript.jsonl": "{}\n", "stdout.log": "x", "gateway.jsonl": ""},
        "case-3": {},
    })
    write_summary(RunDir(root), make_summary())
    return root


def test_reports_are_rebuilt_from_the_stored_results(tmp_path: Path) -> None:
    root = _run_with_summary(tmp_path)
    stored = json.loads((root / "summary.json").read_text())
    stored["per_case"]["case-1"]["correct"]["value"] = False  # an edited verdict changes the statistics
    (root / "summary.json").write_text(json.dumps(stored))
    result = build_reports(root)
    assert result.summary.judges["correct"].pass_rate == 0.0
    assert result.exit_code == 1
    for path in (result.reports.html, result.reports.junit, result.reports.summary_yaml, result.reports.summary_json):
        assert path.is_file()
    assert json.loads(result.reports.summary_json.read_text())["judges"]["correct"]["pass_rate"] == 0.0
    html = result.reports.html.read_text()
    assert 'href="cases/' not in html  # nothing links to a file next to the report
    assert "$0.5000" in html and "cases/case-1/</code>: run_result.json, stdout.log, transcript.jsonl, gateway.jsonl." in html


def test_text_and_json_results(tmp_path: Path) -> None:
    result = build_reports(_run_with_summary(tmp_path))
    lines = result.text_lines()
    # Only case-1 has an outcome in the run directory: the other two are counted as never ran.
    assert lines[0] == "demo: 3 planned cases (1 ran, 1 completed), 2 judges (run r-1)"
    assert "  correct: pass_rate=50.0% (1 of 2 cases passed; 2 scored, 0 errored, 1 skipped)" in lines
    assert "  quality: mean=3.50 over 2 cases (2 scored, 1 errored, 0 skipped)  [0/1 stable over 3 samples]" in lines
    assert lines[lines.index("NOT COMPLETED: 2 of 3 cases") + 1].startswith(f"  {HOSTILE_CASE}: error, never ran")
    assert lines[-3:] == ["REGRESSIONS: 2 detected", "  [correct] pass_rate: >= 0.9 -> 0.5", "  [quality] mean: >= 4.0 -> 3.5"]
    data = result.to_json()
    json.dumps(data)
    assert data["passed"] is False and data["exit_code"] == 1
    assert data["regressions"] == ["[correct] pass_rate: >= 0.9 -> 0.5", "[quality] mean: >= 4.0 -> 3.5"]
    assert data["per_case"][HOSTILE_CASE]["quality"]["status"] == "error"
    assert data["reports"]["html"].endswith("report.html")


def test_an_unjudged_run_or_a_non_run_is_a_run_dir_error(tmp_path: Path) -> None:
    root = make_run(tmp_path, None, {"c": {}})
    with pytest.raises(RunDirError, match="has not been judged yet"):
        build_reports(root)
    with pytest.raises(RunDirError, match="not a run directory"):
        build_reports(tmp_path)


def test_case_outcomes_prefer_the_case_file_and_fall_back_to_per_case(tmp_path: Path) -> None:
    root = make_run(tmp_path, None, {"a": {"run_result.json": case_result(end_reason="oom_killed", exit_code=137)},
                                     "b": {}})
    result = json.loads((root / "run_result.json").read_text())
    result["per_case"]["b"] = {"end_reason": "budget_exhausted", "cost_usd": 1.5, "duration_s": "bad"}
    (root / "run_result.json").write_text(json.dumps(result))
    run = open_finished_run(root)
    a, b, ghost = (read_case_view(run, c).outcome for c in ("a", "b", "ghost"))
    assert a is not None and (a.end_reason, a.exit_code) == ("oom_killed", 137)
    assert b is not None and (b.end_reason, b.cost_usd, b.duration_s) == ("budget_exhausted", 1.5, None)
    assert ghost is None and read_case_view(run, "ghost").present == ()
