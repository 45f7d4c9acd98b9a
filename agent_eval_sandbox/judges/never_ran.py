"""Which cases never ran (pure): the rule of issue 13, "never-ran is never a pass".

A case never ran when it has no outcome, when the run was stopped before it
finished (`interrupted`), when the tool's own plumbing failed around it
(`infra_error`), or when its agent's command never started. Such a case is
failing for every judge, gets the reward of a failure, and is never sent to a
judge model (no cost).
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.rundir.read import FinishedRun

NEVER_JUDGED: frozenset[str] = frozenset({"interrupted", "infra_error"})
# End reasons only an agent command that ran can have (records that predate `agent_duration_s` included).
AGENT_ENDINGS: frozenset[str] = frozenset({"exited", "timed_out", "budget_exhausted", "signaled", "oom_killed"})


def never_ran(outcome: CaseOutcome | None) -> bool:
    if outcome is None or outcome.end_reason in NEVER_JUDGED:
        return True
    return not (outcome.ran or outcome.end_reason in AGENT_ENDINGS)


def incomplete(outcome: CaseOutcome | None) -> bool:
    """The agent ran but did not end by itself: judged on what it left."""
    return not never_ran(outcome) and outcome is not None and outcome.end_reason != "exited"


def never_ran_cases(run: FinishedRun, case_ids: Iterable[str]) -> frozenset[str]:
    return frozenset(case for case in case_ids if never_ran(run.outcome(case)))
