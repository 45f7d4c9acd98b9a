"""Which cases are judged, and how their results are marked (pure): the never-ran rule.

    not_run     the agent never ran, or what it did cannot be trusted to be there: no judge
                runs; every judge's result is `status: not_run`, which counts as failing
    incomplete  the agent ran but was stopped (timed_out, budget_exhausted, signaled,
                oom_killed, or an error after it ran): judged on what it left, every result
                marked `incomplete: true`
    completed   the agent ended by itself (`exited`, whatever its exit code): judged as is

A case is `not_run` when it has no outcome, when it ended `interrupted` (the run
was stopped before it finished) or `infra_error` (the tool's own plumbing
failed: nothing of it is the skill's work), or when its agent's command never
started (`error`, `hook_failed`, `replay_mismatch` before the agent ran).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from agent_eval_sandbox.rundir.models import CaseOutcome

Standing = Literal["not_run", "incomplete", "completed"]

# Never judged, whether or not the agent's command had started.
NEVER_JUDGED: frozenset[str] = frozenset({"interrupted", "infra_error"})
# End reasons only an agent command that ran can have (records that predate `agent_duration_s` included).
AGENT_ENDINGS: frozenset[str] = frozenset({"exited", "timed_out", "budget_exhausted", "signaled", "oom_killed"})


def agent_ran(outcome: CaseOutcome) -> bool:
    return outcome.ran or outcome.end_reason in AGENT_ENDINGS


def standing(outcome: CaseOutcome | None) -> Standing:
    if outcome is None or outcome.end_reason in NEVER_JUDGED or not agent_ran(outcome):
        return "not_run"
    return "completed" if outcome.end_reason == "exited" else "incomplete"


def not_run_cases(outcome_of: Callable[[str], CaseOutcome | None], case_ids: Iterable[str]) -> frozenset[str]:
    """The cases among `case_ids` that are `not_run` (a comparison and the reward count them as failing)."""
    return frozenset(case for case in case_ids if standing(outcome_of(case)) == "not_run")


def not_run_reason(outcome: CaseOutcome | None) -> tuple[str, str]:
    """(end_reason, the one line every judge's result gives) for a case that is not judged."""
    if outcome is None:
        return "error", "not judged: the case has no recorded outcome (it never ran, or its results were lost)"
    why = f": {one_line(outcome.error)}" if outcome.error else ""
    return outcome.end_reason, f"not judged: the case did not run (end_reason: {outcome.end_reason}){why}"


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line, cut at `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
