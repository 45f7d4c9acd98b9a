"""What went wrong in a judged run, in the order a reader needs it (pure).

A verdict fails when it is a boolean False, when the judge errored, or when a
score is below its judge's `min_mean` gate (a score has no verdict of its own
otherwise). A case did not complete when its agent did not end by itself
(`CaseOutcome.completed`), or when there is no record of how it ended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent_eval_sandbox.judges.results import CaseResult
from agent_eval_sandbox.report.summary import Summary
from agent_eval_sandbox.rundir.models import CaseOutcome


@dataclass(frozen=True)
class FailedVerdict:
    case_id: str
    judge: str
    result: CaseResult
    why: str  # "fail", "error", or "below min_mean 4"


def failed_verdicts(summary: Summary) -> list[FailedVerdict]:
    """Every failing (case, judge), case by case in the summary's order."""
    failed: list[FailedVerdict] = []
    for case_id, results in summary.per_case.items():
        for judge, result in results.items():
            why = _why(result, summary, judge)
            if why:
                failed.append(FailedVerdict(case_id, judge, result, why))
    return failed


def _why(result: CaseResult, summary: Summary, judge: str) -> str | None:
    if result.status == "error":
        return "error"
    if result.status == "not_run":
        return "never ran"
    if result.status != "scored":
        return None
    value = result.value
    if isinstance(value, bool):
        return None if value else "fail"
    gates = summary.thresholds.config.get(judge)
    if gates is not None and gates.min_mean is not None and value is not None and value < gates.min_mean:
        return f"below min_mean {gates.min_mean:g}"
    return None


def not_completed(case_ids: Sequence[str], outcomes: Mapping[str, CaseOutcome | None]) -> list[str]:
    """The cases whose agent did not finish its work (or that left no record), in order."""
    return [case_id for case_id in case_ids if not is_completed(outcomes.get(case_id))]


def is_completed(outcome: CaseOutcome | None) -> bool:
    return outcome is not None and outcome.completed


def judged_incomplete(result: CaseResult, outcome: CaseOutcome | None) -> bool:
    """A verdict given on a case that did not complete: the judge saw only what it left.

    Read from the result when the judging marks it (`incomplete`), else from the case's outcome.
    """
    marked = getattr(result, "incomplete", None)
    if isinstance(marked, bool):
        return marked
    return result.status != "skipped" and not is_completed(outcome)


def problem_cases(summary: Summary, case_ids: Sequence[str], outcomes: Mapping[str, CaseOutcome | None]) -> set[str]:
    """Cases the reader looks at first: not completed, or with a failing verdict."""
    return set(not_completed(case_ids, outcomes)) | {f.case_id for f in failed_verdicts(summary)}
