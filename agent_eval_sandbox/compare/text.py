"""The comparison as the terminal shows it: one row per judge, the pairwise tally, the regressions (pure)."""

from __future__ import annotations

from agent_eval_sandbox.compare.models import Comparison, JudgeComparison

_HEAD = ("judge", "metric", "baseline", "run", "delta", "n", "+/-/=", "mean delta [CI]", "p", "verdict")


def _value(judge: JudgeComparison, value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1%}" if judge.metric == "pass_rate" else f"{value:.3g}"


def _delta(judge: JudgeComparison) -> str:
    if judge.delta is None:
        return "n/a"
    return f"{judge.delta:+.1%}" if judge.metric == "pass_rate" else f"{judge.delta:+.3g}"


def _interval(judge: JudgeComparison) -> str:
    if judge.mean_delta is None:
        return "n/a"
    if judge.ci_low is None or judge.ci_high is None:
        return f"{judge.mean_delta:+.3g}"
    return f"{judge.mean_delta:+.3g} [{judge.ci_low:+.3g}, {judge.ci_high:+.3g}]"


def _row(name: str, judge: JudgeComparison) -> tuple[str, ...]:
    p_value = "n/a" if judge.p_value is None else f"{judge.p_value:.3g}"
    return (name, judge.metric or "", _value(judge, judge.b), _value(judge, judge.a), _delta(judge), str(judge.n),
            f"{judge.better}/{judge.worse}/{judge.same}", _interval(judge), p_value, judge.verdict)


def comparison_lines(comparison: Comparison) -> list[str]:
    """The table and the verdict lines `compare` (and `run --baseline`) print."""
    run_a, run_b = comparison.run_a, comparison.run_b
    lines = [f"Comparison: run {run_a.run_id} (under test) against baseline {run_b.run_id}: "
             f"{comparison.paired_cases} cases paired, {len(comparison.only_in_a)} only in the run, "
             f"{len(comparison.only_in_b)} only in the baseline"]
    rows = [_HEAD, *(_row(name, judge) for name, judge in comparison.judges.items())]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEAD))]
    lines += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    for what, ids in (("only in the run", comparison.only_in_a), ("only in the baseline", comparison.only_in_b)):
        if ids:
            more = f", … (+{len(ids) - 10})" if len(ids) > 10 else ""
            lines.append(f"  cases {what} (not compared): {', '.join(ids[:10])}{more}")
    pairwise = comparison.pairwise
    if pairwise is not None:
        win_rate = "n/a" if pairwise.win_rate is None else f"{pairwise.win_rate:.1%}"
        lines.append(f"  pairwise ({pairwise.judge}): run won {pairwise.wins_a}, baseline won {pairwise.wins_b}, "
                     f"{pairwise.ties} tied, {pairwise.errors} errored, {pairwise.not_run} not run "
                     f"of {pairwise.cases_compared}: win_rate={win_rate}")
    lines += [f"  warning: {warning}" for warning in comparison.warnings]
    lines.append(f"  delta = run - baseline; p: paired sign-flip test (alpha {comparison.alpha:g}); "
                 f"CI: {comparison.confidence:.0%} Student-t interval of the mean paired difference")
    regressed = comparison.regression_lines()
    lines.append(f"REGRESSIONS vs baseline: {len(regressed)} detected" if regressed else "REGRESSIONS vs baseline: 0")
    lines += [f"  {line}" for line in regressed]
    return lines
