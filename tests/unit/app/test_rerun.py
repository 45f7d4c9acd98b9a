"""Which cases a rerun takes and a resume keeps, and the resume's fingerprint check (no Docker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.app.rerun import check_unchanged, failed_case_ids, fingerprint, plan_resume
from agent_eval_sandbox.app.scaffold import write_scaffold
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.rundir.layout import RunDir


def _outcome(case_id: str, end_reason: str, ran: bool = True) -> dict[str, object]:
    return {"case_id": case_id, "cases": [case_id], "end_reason": end_reason, "exit_code": 0,
            "agent_duration_s": 1.0 if ran else None}


def _run(tmp_path: Path, outcomes: dict[str, dict[str, object]], verdicts: dict[str, object] | None = None,
         meta: dict[str, object] | None = None) -> RunDir:
    run = RunDir.create(tmp_path / "runs", "e", "r1")
    run.run_json.write_text(json.dumps(meta or {"run_id": "r1"}))
    run.run_result.write_text(json.dumps({"per_case": outcomes, "interrupted": True}))
    if verdicts is not None:
        run.summary_yaml.write_text(yaml.safe_dump({"per_case": verdicts}))
    return run


def test_rerun_takes_judge_failures_errors_and_unfinished_cases(tmp_path: Path) -> None:
    run = _run(tmp_path, {
        "pass": _outcome("pass", "exited"), "fail": _outcome("fail", "exited"),
        "err": _outcome("err", "exited"), "slow": _outcome("slow", "timed_out"),
    }, {
        "pass": {"j": {"value": True, "status": "scored"}, "n": {"value": 0.2, "status": "scored"}},
        "fail": {"j": {"value": False, "status": "scored"}},
        "err": {"j": {"value": None, "status": "error"}},
        "slow": {"j": {"value": True, "status": "scored"}},
    })
    failed, _ = failed_case_ids(run.root)
    assert failed == ["fail", "err", "slow"]


def test_an_unjudged_run_reruns_every_case(tmp_path: Path) -> None:
    run = _run(tmp_path, {"a": _outcome("a", "exited")})
    assert failed_case_ids(run.root)[0] == ["a"]


def test_resume_keeps_finished_cases_and_runs_the_rest(tmp_path: Path) -> None:
    run = _run(tmp_path, {
        "done": _outcome("done", "exited"), "slow": _outcome("slow", "timed_out"),
        "cut": _outcome("cut", "interrupted"), "never": _outcome("never", "interrupted", ran=False),
        "infra": _outcome("infra", "infra_error"),
    })
    plan = plan_resume(run.root)
    assert plan.to_run == ["cut", "never", "infra"]
    assert [o.case_id for o in plan.kept] == ["done", "slow"]


def test_a_finished_or_unrecorded_run_is_not_resumable(tmp_path: Path) -> None:
    run = _run(tmp_path, {"done": _outcome("done", "exited")})
    with pytest.raises(UserError, match="every case of it finished"):
        plan_resume(run.root)
    run.run_result.unlink()
    with pytest.raises(UserError, match="recorded no cases"):
        plan_resume(run.root)
    with pytest.raises(UserError, match="no run directory"):
        plan_resume(tmp_path)


def test_a_changed_eval_dataset_or_skill_refuses_the_resume(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write_scaffold(project, schema_text="{}")
    loaded = load_eval_config(project / "eval.yaml")
    run = _run(tmp_path, {"c": _outcome("c", "interrupted")}, meta={"fingerprint": fingerprint(loaded)})
    plan = plan_resume(run.root)
    check_unchanged(plan, loaded)
    for changed, part in ((project / "cases" / "002-reading" / "annotations.yaml", "dataset"),
                          (project / ".claude" / "skills" / "note-taker" / "SKILL.md", "skills"),
                          (project / "eval.yaml", "eval")):
        original = changed.read_text()
        changed.write_text(original + "\n# edit\n")
        with pytest.raises(UserError, match=f"{part} changed since it started"):
            check_unchanged(plan, loaded)
        changed.write_text(original)
    check_unchanged(plan, loaded)
