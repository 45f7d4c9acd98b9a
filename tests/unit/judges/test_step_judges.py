"""Judges with `step: <id>` score that step's own trace; the others the whole case (score_run on a hand-made run)."""

from __future__ import annotations

import json
from pathlib import Path

from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.config.models import TracesConfig
from agent_eval_sandbox.judges.record import CaseFiles, build_record
from agent_eval_sandbox.judges.steps import by_step, scoped_files, step_not_run_reason
from agent_eval_sandbox.rundir.models import CaseOutcome, StepOutcome
from tests.unit.judges.rundir_fixture import assistant, case_result, make_project, make_run, tool, tool_result

EVAL = """
name: pipe
models: {skill: claude-sonnet-4-6}
dataset: {path: dataset}
traces: {metrics: true}
execution:
  steps:
    - {id: create, prompt: "make it"}
    - {id: refine, prompt: "refine {{ steps.create.output }}", on_failure: continue}
    - {id: review, prompt: "review"}
judges:
  - name: whole_sees_every_call
    check: |
      names = [c["name"] for c in outputs["tool_calls"]]
      return names == ["Write", "Bash", "Read"], ",".join(names)
  - name: create_sees_its_own
    step: create
    check: |
      names = [c["name"] for c in outputs["tool_calls"]]
      ok = names == ["Write"] and "draft" in outputs["conversation"] and "refined" not in outputs["conversation"]
      return ok and outputs["exit_code"] == 0 and "_modified/final.md" in outputs["files"], ",".join(names)
  - name: refine_failed_on_its_own
    step: refine
    check: |
      return outputs["exit_code"] == 3 and outputs["end_reason"] == "exited", str(outputs["exit_code"])
  - name: review_never_ran
    step: review
    check: "return True, 'would pass'"
"""


def _step(step_id: str, index: int, **more) -> dict:
    fields = {"end_reason": "exited", "exit_code": 0, "agent_duration_s": 1.0, **more}
    return StepOutcome(step_id=step_id, index=index, **fields).to_data()


def test_step_judges_see_their_steps_trace_and_a_step_that_never_ran_is_never_a_pass(tmp_path: Path) -> None:
    config = make_project(tmp_path, EVAL, {"c1": {}})
    create_events = [assistant("draft", [tool("Write", "t1", file_path="final.md")]), tool_result("t1", "ok")]
    refine_events = [assistant("refined", [tool("Bash", "t2", command="false")]), tool_result("t2", "no"),
                     assistant("", [tool("Read", "t3", file_path="final.md")]), tool_result("t3", "x")]
    steps = [_step("create", 0), _step("refine", 1, exit_code=3, on_failure="continue"),
             StepOutcome(step_id="review", index=2, skipped="step refine ...", end_reason="error").to_data()]
    record = case_result(steps=steps, agent_duration_s=2.0)
    run = make_run(tmp_path, config, {"c1": {
        "run_result.json": record,
        "events.json": [*create_events, *refine_events],
        "steps/create/events.json": create_events,
        "steps/refine/events.json": refine_events,
        "_modified/final.md": "the final text",
    }})
    result = score_run(run)
    per_case = json.loads((run / "summary.json").read_text())["per_case"]["c1"]
    assert per_case["whole_sees_every_call"]["value"] is True, per_case["whole_sees_every_call"]
    assert per_case["create_sees_its_own"]["value"] is True, per_case["create_sees_its_own"]
    assert per_case["refine_failed_on_its_own"]["value"] is True, per_case["refine_failed_on_its_own"]
    review = per_case["review_never_ran"]
    assert review["status"] == "not_run" and review.get("value") is not True, review
    assert "step review did not run" in review["rationale"]
    assert result.summary is not None


def test_the_step_mapping_groups_judges_and_knows_a_step_that_did_not_run() -> None:
    assert by_step([("a", None), ("b", "s1"), ("c", None), ("d", "s1")]) == {None: ["a", "c"], "s1": ["b", "d"]}
    outcome = CaseOutcome(steps=[StepOutcome(step_id="s1", agent_duration_s=1.0, end_reason="exited"),
                                 StepOutcome(step_id="s2", skipped="the case's budget is spent")])
    assert step_not_run_reason(outcome, "s1") is None
    assert "budget is spent" in step_not_run_reason(outcome, "s2")[1]
    assert "no recorded outcome" in step_not_run_reason(outcome, "s3")[1]
    assert "no recorded outcome" in step_not_run_reason(None, "s1")[1]


def test_a_step_record_keeps_the_cases_files_and_takes_the_steps_trace(tmp_path: Path) -> None:
    files = CaseFiles(case_id="c1", case_dir=tmp_path, outcome={"exit_code": 0, "end_reason": "exited"},
                      events=[assistant("case text")], stdout="case out", problems=("p",))
    step = StepOutcome(step_id="s", exit_code=1, end_reason="timed_out", agent_duration_s=1.0, result="step answer",
                       limits_hit=["timeout"]).to_data()
    scoped = scoped_files(files, step, [assistant("step text")], "step out", None, ("q",))
    record = build_record(scoped, [], TracesConfig(metrics=True, stdout=True))
    assert record["conversation"].strip().endswith("step text") and "case text" not in record["conversation"]
    assert (record["exit_code"], record["end_reason"], record["limits_hit"]) == (1, "timed_out", ["timeout"])
    assert record["stdout"] == "step out" and scoped.problems == ("p", "q")
