"""`score RUN_DIR` end to end: config resolution, every judge kind, thresholds, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.errors import ConfigError, RunDirError
from agent_eval_sandbox.report.build import build_reports
from tests.unit.judges.rundir_fixture import case_result, make_project, make_run

EVAL = """
name: e2e
title: E2E report
dataset: {path: dataset}
outputs: [{path: artifacts}]
judges:
  - name: has_report
    check: |
      return "artifacts/report.md" in outputs["files"], "looked for artifacts/report.md"
  - name: gold_only
    if: "annotations.get('tier') == 'gold'"
    check: "return True, 'gold case'"
  - name: needs_tier
    if: "annotations['tier'] == 'gold'"
    check: "return True, ''"
  - name: budget
    builtin: efficiency/cost_budget
    arguments: {max_cost_usd: 1.0}
  - name: tool_judge
    agent: {}
    prompt: "grade"
  - name: pairwise
    prompt: "compare"
thresholds:
  has_report: {min_pass_rate: 0.5}
  tool_judge: {min_pass_rate: 0.5}
  budget: {min_pass_rate: 0.5, max_error_rate: 0.0}
"""


def _run(tmp_path: Path, eval_yaml: str = EVAL) -> Path:
    config = make_project(tmp_path, eval_yaml, {"ok": {"annotations": {"tier": "gold"}}, "plain": {}, "crashed": {}})
    run = make_run(tmp_path, config, {
        "ok": {"run_result.json": case_result(), "artifacts/report.md": "# Report"},
        "plain": {"run_result.json": case_result(end_reason="timed_out", exit_code=-1)},
    })
    result = json.loads((run / "run_result.json").read_text())
    result["per_case"]["crashed"] = {"end_reason": "error", "error": "sandbox vanished"}
    (run / "run_result.json").write_text(json.dumps(result))
    return run


def test_every_case_and_judge_gets_a_verdict(tmp_path: Path) -> None:
    result = score_run(_run(tmp_path))
    per_case = result.summary.per_case
    assert list(per_case) == ["crashed", "ok", "plain"]
    assert list(per_case["ok"]) == ["has_report", "gold_only", "needs_tier", "budget", "tool_judge"]  # no pairwise
    assert [per_case[c]["has_report"].value for c in ("crashed", "ok", "plain")] == [None, True, False]
    # the crashed case never ran: no judge ran on it, every result says so and none is a pass
    assert {r.status for r in per_case["crashed"].values()} == {"not_run"}
    assert per_case["crashed"]["budget"].error == "not judged: the case did not run (end_reason: error): sandbox vanished"
    # the timed-out case ran: judged on what it left, and marked
    assert per_case["plain"]["has_report"].incomplete is True and per_case["plain"]["has_report"].end_reason == "timed_out"
    assert per_case["plain"]["gold_only"].status == "skipped"
    assert per_case["plain"]["gold_only"].rationale == "Skipped: condition 'annotations.get('tier') == 'gold'' is false"
    assert per_case["ok"]["gold_only"].value is True
    assert per_case["plain"]["needs_tier"].status == "error" and "raised KeyError" in per_case["plain"]["needs_tier"].error
    # the agent judge has no model here: an error where the case ran (no sandbox starts), not_run where it did not
    assert per_case["ok"]["tool_judge"].status == "error" and "no model" in per_case["ok"]["tool_judge"].error
    judges = result.summary.judges
    assert judges["gold_only"].skipped_cases == 1 and judges["needs_tier"].errored_cases == 1
    assert judges["has_report"].not_run_cases == 1 and judges["has_report"].pass_rate == 1 / 3
    assert judges["tool_judge"].status == "ERROR"


def test_a_failing_threshold_exits_1_and_names_the_threshold(tmp_path: Path) -> None:
    result = score_run(_run(tmp_path))
    assert result.exit_code == 1
    assert result.text_lines()[-4:] == [
        "REGRESSIONS: 3 detected",
        "  [has_report] pass_rate: >= 0.5 -> 0.3333",
        "  [tool_judge] pass_rate: >= 0.5 -> n/a   no case was judged: 1 of 3 never ran, 2 errored (see the cases' end reasons)",
        "  [budget] error_rate: <= 0.0 -> 0.3333",
    ]


def test_met_thresholds_exit_0(tmp_path: Path) -> None:
    eval_yaml = EVAL.split("thresholds:")[0] + "thresholds:\n  budget: {min_pass_rate: 0.6, max_error_rate: 0.34}\n  has_report: {min_mean: 0.3}\n"
    result = score_run(_run(tmp_path, eval_yaml))
    assert result.exit_code == 0 and result.text_lines()[-1] == "REGRESSIONS: 0"
    assert result.to_json()["passed"] is True


def test_reports_are_written_and_report_rebuilds_them_identically(tmp_path: Path) -> None:
    run = _run(tmp_path)
    scored = score_run(run)
    summary = yaml.safe_load((run / "summary.yaml").read_text())
    assert summary["run_id"] and set(summary["judges"]) == {"has_report", "gold_only", "needs_tier", "budget", "tool_judge"}
    assert summary["title"] == "E2E report" and summary["config_path"].endswith("project/eval.yaml")
    assert (run / "report.html").is_file() and (run / "junit.xml").is_file()
    rebuilt = build_reports(run)
    assert rebuilt.summary == scored.summary
    assert rebuilt.exit_code == scored.exit_code == 1


def test_the_config_comes_from_run_json_or_the_caller(tmp_path: Path) -> None:
    run = _run(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("name: other\ndataset: {path: project/dataset}\njudges:\n  - name: only\n    check: \"return True, 'x'\"\n")
    result = score_run(run, config_path=other)
    assert result.summary.eval == "other" and list(result.summary.judges) == ["only"]
    meta = json.loads((run / "run.json").read_text())
    del meta["config_path"]
    (run / "run.json").write_text(json.dumps(meta))
    with pytest.raises(RunDirError, match="run.json does not record the eval.yaml"):
        score_run(run)
    with pytest.raises(RunDirError, match="does not exist"):
        score_run(run, config_path=tmp_path / "missing.yaml")


def test_not_a_run_and_a_broken_config_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="not a run directory"):
        score_run(tmp_path)
    run = _run(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("judges: 3\n")
    with pytest.raises(ConfigError):
        score_run(run, config_path=bad)


def test_an_unknown_builtin_is_a_config_error_before_any_judging(tmp_path: Path) -> None:
    """The eval.yaml may change between a run and its re-scoring: the loader refuses the typo."""
    eval_yaml = "name: u\ndataset: {path: dataset}\njudges:\n  - name: typo\n    builtin: cost_budgt\n"
    config = make_project(tmp_path, eval_yaml, {"c": {}})
    run_dir = make_run(tmp_path, config, {"c": {}})
    with pytest.raises(ConfigError, match="unknown builtin judge 'cost_budgt'. Available: efficiency/cost_budget"):
        score_run(run_dir)
    assert not (run_dir / "summary.yaml").exists()


WHERE_JUDGE = """
import json, os, sys

def where(outputs):
    return True, json.dumps({"cwd": os.getcwd(), "path": sys.path, "json": json.__file__})
"""
PLANTED_JSON = "import os\nopen(os.environ['AGENT_CODE_MARKER'], 'w').close()\n"


def test_judge_code_runs_from_the_project_never_from_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module judge imports from the project; the agent's files in the run are data, wherever
    `score` is started from and whatever the caller's PYTHONPATH says about the run."""
    project_eval = make_project(tmp_path, """
        name: where
        dataset: {path: dataset}
        outputs: [{path: artifacts}]
        judges:
          - name: where
            module: judging.where
            function: where
    """, {"c1": {}}, extra={"judging/__init__.py": "", "judging/where.py": WHERE_JUDGE})
    project = project_eval.parent
    planted = {"json/__init__.py": PLANTED_JSON, "judging/__init__.py": "", "judging/where.py": PLANTED_JSON,
               "artifacts/json/__init__.py": PLANTED_JSON, "_modified/json/__init__.py": PLANTED_JSON}
    # the run directory inside the project, as with the default runs dir
    run = make_run(project, project_eval, {"c1": {"run_result.json": case_result(), **planted}})
    case_dir = run / "cases" / "c1"
    marker = tmp_path / "AGENT-CODE-RAN"
    monkeypatch.setenv("AGENT_CODE_MARKER", str(marker))
    monkeypatch.setenv("PYTHONPATH", f":{case_dir}:{case_dir}/artifacts:artifacts")
    monkeypatch.chdir(case_dir)
    result = score_run(run)
    verdict = result.summary.per_case["c1"]["where"]
    assert verdict.value is True, verdict
    seen = json.loads(verdict.rationale)
    assert seen["cwd"] == str(project)
    # (relative entries would resolve against the cwd, the project; the editable install adds a path hook name)
    inside = [p for p in seen["path"]
              if p in ("", ".") or (Path(p).is_absolute() and Path(p).resolve().is_relative_to(run))]
    assert inside == [], seen["path"]
    assert not Path(seen["json"]).resolve().is_relative_to(run)
    assert not marker.exists()
