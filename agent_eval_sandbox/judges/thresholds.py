"""Thresholds: judge statistics against the `thresholds:` gates (pure).

`min_*` keys pass when the metric is >= the limit, `max_error_rate` when the
error rate is <= it, so equality passes. A gate whose metric is unavailable
is a regression (value "n/a"), never skipped, and so is every gate of a judge
that scored no case at all (every case errored, never ran or was skipped):
nothing judged is never a pass. A gate naming a judge that has no results is
ignored, as in the reference (the loader warns about it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel

from agent_eval_sandbox.config.models import ThresholdConfig
from agent_eval_sandbox.judges.results import JudgeStats

ThresholdKey = Literal["min_pass_rate", "min_mean", "min_win_rate", "max_error_rate"]
# (key, metric, judge kind named in the "unavailable" detail)
_GATES: tuple[tuple[ThresholdKey, str, str], ...] = (
    ("min_pass_rate", "pass_rate", "boolean"),
    ("min_mean", "mean", "numeric"),
    ("min_win_rate", "win_rate", "pairwise"),
    ("max_error_rate", "error_rate", ""),
)


class ThresholdCheck(BaseModel):
    judge: str
    key: ThresholdKey
    metric: str
    limit: float
    actual: float | None
    passed: bool
    detail: str = ""

    @property
    def expected(self) -> str:
        return f"{'<=' if self.key == 'max_error_rate' else '>='} {self.limit}"

    @property
    def actual_text(self) -> str:
        return "n/a" if self.actual is None else str(round(self.actual, 4))

    def line(self) -> str:
        """`[judge] metric: >= 3.5 -> 3.1`, as the reference prints a regression."""
        text = f"[{self.judge}] {self.metric}: {self.expected} -> {self.actual_text}"
        return f"{text}   {self.detail}" if self.detail else text


def _unavailable(metric: str, kind: str, stats: JudgeStats) -> str:
    if stats.scored_cases == 0 and stats.not_run_cases > 0:
        others = "".join(f", {n} {what}" for n, what in ((stats.errored_cases, "errored"),
                                                          (stats.skipped_cases, "skipped")) if n)
        return (f"no case was judged: {stats.not_run_cases} of {stats.total_cases} never ran{others} "
                "(see the cases' end reasons)")
    if stats.scored_cases == 0 and stats.errored_cases > 0:
        return f"{metric} unavailable — judge errored on {stats.errored_cases} cases; see the per-case rationales"
    if metric == "win_rate":
        return "win_rate unavailable — not a pairwise judge or no comparisons recorded"
    if metric == "error_rate" and stats.total_cases == 0:
        return "error_rate unavailable — the run has no cases"
    if stats.skipped_cases == stats.total_cases and metric == "error_rate":
        return f"no case was judged: the judge was skipped for all {stats.total_cases} cases"
    return f"{metric} unavailable — judge skipped for all cases or not a {kind} judge"


def evaluate_thresholds(
    stats: Mapping[str, JudgeStats], thresholds: Mapping[str, ThresholdConfig]
) -> list[ThresholdCheck]:
    checks: list[ThresholdCheck] = []
    for judge, gates in thresholds.items():
        judge_stats = stats.get(judge)
        if judge_stats is None:
            continue
        for key, metric, kind in _GATES:
            limit = getattr(gates, key)
            if limit is None:
                continue
            actual: float | None = getattr(judge_stats, metric)
            if actual is None or (judge_stats.scored_cases == 0 and judge_stats.total_cases > 0):
                checks.append(ThresholdCheck(judge=judge, key=key, metric=metric, limit=limit, actual=actual,
                                             passed=False, detail=_unavailable(metric, kind, judge_stats)))
                continue
            passed = actual <= limit if key == "max_error_rate" else actual >= limit
            checks.append(ThresholdCheck(judge=judge, key=key, metric=metric, limit=limit, actual=actual,
                                         passed=passed))
    return checks


def regressions(checks: list[ThresholdCheck]) -> list[ThresholdCheck]:
    return [check for check in checks if not check.passed]


def regression_lines(checks: list[ThresholdCheck]) -> list[str]:
    """`REGRESSIONS: 0`, or `REGRESSIONS: N detected` and one indented line each."""
    failed = regressions(checks)
    if not failed:
        return ["REGRESSIONS: 0"]
    return [f"REGRESSIONS: {len(failed)} detected", *(f"  {check.line()}" for check in failed)]


def exit_code(checks: list[ThresholdCheck]) -> int:
    """0 when every threshold is met, 1 on a regression."""
    return 1 if regressions(checks) else 0
