"""Planning and templating a pipeline's steps, and how its steps make the case's ending (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.config.dataset import Case
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.config.templating import render_template
from agent_eval_sandbox.errors import TemplateError
from agent_eval_sandbox.rundir.models import CaseOutcome, Integrity, StepOutcome
from agent_eval_sandbox.runner.steps import (
    StepView,
    changed_files,
    check_step_templates,
    parse_listing,
    pipeline_ending,
    pipeline_totals,
    plan_steps,
    skipped_step,
    step_limits,
    step_prompt,
    stops_pipeline,
)

PIPELINE = {
    "name": "p",
    "models": {"skill": "claude-sonnet-4-6"},
    "runner": {"effort": "low", "permission_mode": "acceptEdits"},
    "execution": {
        "timeout": 300,
        "max_budget_usd": 2.0,
        "env": {"SHARED": "case", "KEEP": "1", "FROM_HOST": "$HOST_VAR"},
        "steps": [
            {"id": "create", "skill": "rfe.create", "arguments": "{{ input.topic }}", "env": {"SHARED": "step"},
             "timeout": 60, "max_budget_usd": 0.5, "runner": {"effort": "high"}, "on_failure": "continue"},
            {"id": "refine", "prompt": "Refine: {{ steps.create.output }} (exit {{ steps.create.exit_code }}, "
                                      "files {{ steps.create.files | join(',') }})"},
            {"id": "review", "prompt": "Review {steps.refine.output} for {topic}"},
        ],
    },
}


def _config() -> EvalConfig:
    return EvalConfig.model_validate(PIPELINE)


def _case(tmp_path: Path, data: dict | None = None) -> Case:
    return Case("c1", tmp_path, data if data is not None else {"topic": "caching"}, tmp_path / "input.yaml")


def _plans():
    config = _config()
    return plan_steps(config, resolve_run_settings(config, CliOverrides()), {"HOST_VAR": "from-host"})


def test_each_step_falls_back_to_the_execution_block_and_merges_its_own_over_it():
    create, refine, _ = _plans()
    assert (create.timeout_s, create.budget_usd, create.on_failure) == (60.0, 0.5, "continue")
    assert (refine.timeout_s, refine.budget_usd, refine.on_failure) == (300.0, 2.0, "fail")
    assert create.env == {"SHARED": "step", "KEEP": "1", "FROM_HOST": "from-host"}
    assert refine.env == {"SHARED": "case", "KEEP": "1", "FROM_HOST": "from-host"}
    # The step's runner block overrides only what it sets.
    assert (create.config.runner.effort, create.config.runner.permission_mode) == ("high", "acceptEdits")
    assert (refine.config.runner.effort, refine.config.runner.permission_mode) == ("low", "acceptEdits")


def test_a_later_step_sees_the_earlier_ones_output_exit_code_and_files(tmp_path):
    create, refine, review = _plans()
    case = _case(tmp_path)
    assert step_prompt(create, case, {}) == "/rfe.create caching"
    views = {"create": StepView("draft v1", 0, ("out/a.md", "notes.txt"))}
    assert step_prompt(refine, case, views) == "Refine: draft v1 (exit 0, files out/a.md,notes.txt)"
    # Brace templates reach steps.<id>.<key> too.
    views["refine"] = StepView("draft v2", 1, ())
    assert step_prompt(review, case, views) == "Review draft v2 for caching"


def test_a_template_error_names_the_input_file_the_step_and_eval_yaml(tmp_path):
    _, refine, _ = _plans()
    with pytest.raises(TemplateError) as caught:
        step_prompt(refine, _case(tmp_path), {}, Path("/p/eval.yaml"))
    message = caught.value.message
    assert str(tmp_path / "input.yaml") in message and "step refine" in message
    assert "/p/eval.yaml: execution.steps[1].prompt" in message


def test_planning_renders_every_step_for_every_case_before_anything_runs(tmp_path):
    assert check_step_templates(_config(), _case(tmp_path)) == "/rfe.create caching"
    with pytest.raises(TemplateError, match=r"step create: Missing required field in template: topic"):
        check_step_templates(_config(), _case(tmp_path, {"other": 1}))


def test_render_template_keeps_input_only_templates_as_they_were():
    assert render_template("{{ input.a }}", {"a": "x"}) == "x"
    assert render_template("{a}", {"a": "x"}) == "x"
    with pytest.raises(TemplateError):
        render_template("{{ steps.a.output }}", {"a": "x"})


@pytest.mark.parametrize(("own_s", "left_s", "own_usd", "left_usd", "expected"), [
    (60, 300, 0.5, 2.0, (60, 0.5, False)),  # the step's own are the tighter
    (300, 100, 2.0, 0.3, (100, 0.3, True)),  # what is left of the case's is
    (300, 300, 2.0, 2.0, (300, 2.0, True)),  # the same: reaching it is the case's deadline
    (60, -5, 0.5, -1.0, (0, 0.0, True)),  # nothing left
])
def test_a_steps_deadline_and_cap_are_its_own_within_what_is_left_of_the_cases(own_s, left_s, own_usd, left_usd,
                                                                              expected):
    plan = _plans()[0]
    plan = type(plan)(**{**plan.__dict__, "timeout_s": float(own_s), "budget_usd": own_usd})
    limits = step_limits(plan, case_left_s=left_s, case_left_usd=left_usd)
    assert (limits.timeout_s, limits.budget_usd, limits.case_deadline) == expected


def test_files_are_what_the_step_added_or_modified():
    raw = b"3 1.5 a.txt\x004 2.0 dir/b c.md\x00junk\x00"
    before = parse_listing(raw)
    assert before == {"a.txt": (3, "1.5"), "dir/b c.md": (4, "2.0")}
    after = {**before, "a.txt": (3, "9.0"), "new.txt": (1, "3.0")}
    del after["dir/b c.md"]
    assert changed_files(before, after) == ["a.txt", "new.txt"]


def _step(step_id: str, *, exit_code: int | None = 0, end_reason: str = "exited", on_failure: str = "fail",
          ran: bool = True, **more) -> StepOutcome:
    return StepOutcome(step_id=step_id, exit_code=exit_code, end_reason=end_reason, on_failure=on_failure,
                       agent_duration_s=1.0 if ran else None, **more)


def test_on_failure_fail_stops_the_pipeline_and_continue_does_not():
    assert stops_pipeline(_step("a")) is None
    assert "on_failure is fail" in stops_pipeline(_step("a", exit_code=2))
    assert stops_pipeline(_step("a", exit_code=2, on_failure="continue")) is None
    assert stops_pipeline(_step("a", exit_code=None, end_reason="timed_out", on_failure="continue")) is None
    assert "timed_out" in stops_pipeline(_step("a", exit_code=None, end_reason="timed_out"))
    # The tool's own failures and interrupts stop it whatever the step says.
    for reason in ("infra_error", "interrupted", "hook_failed"):
        assert stops_pipeline(_step("a", exit_code=None, end_reason=reason, on_failure="continue")) is not None


def test_the_cases_ending_comes_from_its_fail_steps_and_from_what_stopped_it():
    ok, tolerated = _step("a"), _step("b", exit_code=3, on_failure="continue")
    assert pipeline_ending([ok, tolerated, _step("c")]) == type(pipeline_ending([]))("exited", 0)
    failed = _step("c", exit_code=2)
    assert pipeline_ending([ok, failed]).exit_code == 2
    timed_out = _step("b", exit_code=None, end_reason="timed_out", on_failure="continue")
    skipped = skipped_step(_plans()[2], "the case's deadline passed")
    # A tolerated step the case's deadline stopped is the case's ending all the same.
    ending = pipeline_ending([ok, timed_out, skipped], hard_stop=timed_out)
    assert (ending.end_reason, ending.exit_code) == ("timed_out", None)
    assert pipeline_ending([ok, timed_out, skipped]).end_reason == "exited"
    assert pipeline_ending([skipped_step(p, "x") for p in _plans()]).end_reason == "error"
    # Steps left unstarted by the case's budget: not complete, though every step that ran exited.
    cut = pipeline_ending([ok, skipped_step(_plans()[1], "the case's budget is spent")], cut="budget_exhausted")
    assert (cut.end_reason, cut.exit_code) == ("budget_exhausted", 0)


def test_the_cases_numbers_sum_its_steps_and_its_answer_is_the_last_steps():
    a = _step("a", cli_cost_usd=0.1, num_turns=2, token_usage={"input_tokens": 5}, result="one", session_id="s1",
              permission_denials=[{"tool_name": "Bash"}],
              integrity=Integrity(checked=True, dropped=1, findings=[{"line": 3, "kind": "assistant", "reason": "r"}]))
    b = _step("b", cli_cost_usd=0.2, num_turns=1, token_usage={"input_tokens": 7}, result="two", session_id="s2",
              integrity=Integrity(checked=True))
    totals = pipeline_totals([a, b, skipped_step(_plans()[2], "x")])
    assert (totals.result, totals.session_id, totals.num_turns) == ("two", "s2", 3)
    assert totals.cli_token_usage == {"input_tokens": 12} and totals.cli_cost_usd == pytest.approx(0.3)
    assert totals.permission_denials == [{"tool_name": "Bash"}]
    assert totals.integrity["checked"] is True and totals.integrity["dropped"] == 1
    assert totals.integrity["findings"][0]["step"] == "a"
    unchecked = pipeline_totals([a, _step("b", integrity=Integrity(checked=False))])
    assert unchecked.integrity["checked"] is False


def test_a_case_record_keeps_its_steps_through_a_round_trip():
    outcome = CaseOutcome(case_id="c1", end_reason="exited", exit_code=0, agent_duration_s=2.0,
                          steps=[_step("a", files=["x.md"]), skipped_step(_plans()[1], "stopped")])
    data = outcome.to_data()
    assert data["steps"][0]["ran"] is True and data["steps"][1]["ran"] is False
    back = CaseOutcome.model_validate(data)
    assert back.step("a").files == ["x.md"] and back.step("refine").skipped == "stopped"
    assert back.step("nope") is None
