"""The records' derived facts: whether a case ran, whether it completed, how much of a run finished."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.rundir.models import CaseOutcome, RunResult, parse_outcome


@pytest.mark.parametrize(
    ("end_reason", "agent_duration_s", "ran", "completed"),
    [
        ("exited", 3.0, True, True),
        ("timed_out", 30.0, True, False),
        ("budget_exhausted", 2.0, True, False),
        ("error", None, False, False),
        ("infra_error", None, False, False),
        ("interrupted", None, False, False),
        ("hook_failed", None, False, False),
    ],
)
def test_ran_and_completed_follow_the_exec_and_the_end_reason(
    end_reason: str, agent_duration_s: float | None, ran: bool, completed: bool
) -> None:
    outcome = CaseOutcome.model_validate({"case_id": "c", "end_reason": end_reason,
                                          "agent_duration_s": agent_duration_s})
    assert (outcome.ran, outcome.completed) == (ran, completed)
    assert (outcome.to_data()["ran"], outcome.to_data()["completed"]) == (ran, completed)


def test_stored_ran_and_completed_are_recomputed_not_trusted() -> None:
    stored = {"case_id": "c", "end_reason": "interrupted", "agent_duration_s": None, "ran": True, "completed": True}
    outcome = parse_outcome(stored)
    assert outcome is not None
    assert not outcome.ran and not outcome.completed and outcome.model_extra == {}


def test_a_run_counts_planned_and_finished_cases() -> None:
    done = CaseOutcome(case_id="a", end_reason="exited", exit_code=0, agent_duration_s=1.0)
    stopped = CaseOutcome(case_id="b", end_reason="interrupted")
    result = RunResult.from_outcomes([done, stopped], mode="case", model=None, wall_clock_s=1.0,
                                     agent_version=None, planned=3, interrupted=True)
    assert (result.interrupted, result.planned, result.finished) == (True, 3, 1)
    whole = RunResult.from_outcomes([done], mode="case", model=None, wall_clock_s=1.0, agent_version=None)
    assert (whole.interrupted, whole.planned, whole.finished) == (False, 1, 1)
