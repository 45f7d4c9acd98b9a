"""Per-judge deltas between a run (A) and its baseline (B), from their summaries (pure).

Cases are paired by case id. A case only one run has is listed
(`only_in_a` / `only_in_b`), never silently dropped. For each judge a case
enters the paired test when both runs have a value for it:

- scored: its value (a verdict as 1 / 0);
- never ran (issue 13, "never-ran is never a pass"): it counts as failing,
  as in the pass rate and the mean — a false verdict, or the bottom of the
  judge's `score_range` (0 without one);
- ran but did not complete: its value, judged on what it left, counted as
  `incomplete_*`;
- the judge errored on it: it counts as failing too (`errored_*`). A run's own
  summary keeps judge errors beside its pass rate (`error_rate`), as the
  reference does; a comparison cannot: an agent that breaks its judge (an
  output the judge cannot parse) would otherwise look better than one that
  answers wrong;
- skipped by the judge's `if:`: no value; the case is listed in `unpaired`.

Each run's aggregate (`pass_rate` for verdicts, `mean` for scores) is the one
its summary states, unless the judge errored on some of its cases: then it is
recomputed with those counted as failing. `delta` = A − B. A judge regressed when its aggregate
dropped by more than `tolerance` (the reference's fixed 0.5 baseline rule) or
the paired test says it is worse at `alpha` (compare/stats.py).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from agent_eval_sandbox.compare.models import CaseValues, Comparison, JudgeComparison, RunRef
from agent_eval_sandbox.compare.stats import paired_stats
from agent_eval_sandbox.judges.results import CaseResult, JudgeStats

DEFAULT_ALPHA = 0.05
DEFAULT_TOLERANCE = 0.5  # the reference's baseline rule: a drop of more than 0.5 is a regression
DEFAULT_CONFIDENCE = 0.95
MAX_CHANGED = 200  # cases listed per judge as changed (the counts cover all of them)


@dataclass(frozen=True)
class RunResults:
    """What the comparison reads of one run: its judges' statistics and per-case results."""

    ref: RunRef
    judges: Mapping[str, JudgeStats]
    per_case: Mapping[str, Mapping[str, CaseResult]]
    never_ran: Collection[str] = frozenset()  # cases whose agent never ran


@dataclass(frozen=True)
class _Value:
    value: float | bool | None
    reason: str = ""  # why there is no value
    not_run: bool = False
    incomplete: bool = False
    errored: bool = False


def _is_bool_judge(a: JudgeStats | None, b: JudgeStats | None) -> bool:
    stats = [s for s in (a, b) if s is not None]
    if any(s.feedback_type == "bool" or s.pass_rate is not None for s in stats):
        return True
    return not any(s.mean is not None for s in stats) and not any(s.score_range for s in stats)


def _floor(a: JudgeStats | None, b: JudgeStats | None) -> float:
    for stats in (a, b):
        if stats is not None and stats.score_range is not None:
            return float(stats.score_range[0])
    return 0.0


def case_value(result: CaseResult | None, *, never_ran: bool, is_bool: bool, floor: float) -> _Value:
    """One run's value of one judge on one case, by the rules above."""
    if never_ran or (result is not None and str(result.status) == "not_run"):
        return _Value(False if is_bool else floor, not_run=True)
    if result is None:
        return _Value(None, "no result")
    status = str(result.status)
    if status == "skipped":
        return _Value(None, "skipped")
    if status != "scored" or result.value is None:
        return _Value(False if is_bool else floor, errored=True)
    return _Value(result.value, incomplete=bool(getattr(result, "incomplete", False)))


def _aggregate(stats: JudgeStats | None, metric: str, run: RunResults, name: str, *, is_bool: bool,
               floor: float) -> float | None:
    """The summary's figure; recomputed with judge errors as failing when the judge errored on a case."""
    if stats is None:
        return None
    stated = stats.pass_rate if metric == "pass_rate" else stats.mean
    if not stats.errored_cases:
        return stated
    values = [case_value(results.get(name), never_ran=case in run.never_ran, is_bool=is_bool, floor=floor)
              for case, results in run.per_case.items() if name in results or case in run.never_ran]
    counted = [float(v.value) for v in values if v.value is not None]
    return sum(counted) / len(counted) if counted else stated


def compare_judge(name: str, a: RunResults, b: RunResults, cases: list[str], *, alpha: float, tolerance: float,
                  confidence: float) -> JudgeComparison:
    stats_a, stats_b = a.judges.get(name), b.judges.get(name)
    is_bool = _is_bool_judge(stats_a, stats_b)
    metric: Literal["pass_rate", "mean"] = "pass_rate" if is_bool else "mean"
    floor = _floor(stats_a, stats_b)
    known = stats_a or stats_b
    judge_type = known.judge_type if known is not None else ""
    found = JudgeComparison(judge_type=judge_type, metric=metric, in_a=stats_a is not None, in_b=stats_b is not None,
                            a=_aggregate(stats_a, metric, a, name, is_bool=is_bool, floor=floor),
                            b=_aggregate(stats_b, metric, b, name, is_bool=is_bool, floor=floor))
    if found.a is not None and found.b is not None:
        found.delta = found.a - found.b
    if stats_a is None or stats_b is None:
        return found
    diffs: list[float] = []
    for case in cases:
        value_a = case_value(a.per_case.get(case, {}).get(name), never_ran=case in a.never_ran, is_bool=is_bool,
                             floor=floor)
        value_b = case_value(b.per_case.get(case, {}).get(name), never_ran=case in b.never_ran, is_bool=is_bool,
                             floor=floor)
        if value_a.value is None or value_b.value is None:
            found.unpaired[case] = "; ".join(
                f"{value.reason} in {side}" for side, value in (("A", value_a), ("B", value_b)) if value.value is None)
            continue
        found.not_run_a += value_a.not_run
        found.not_run_b += value_b.not_run
        found.incomplete_a += value_a.incomplete
        found.incomplete_b += value_b.incomplete
        found.errored_a += value_a.errored
        found.errored_b += value_b.errored
        diff = float(value_a.value) - float(value_b.value)
        diffs.append(diff)
        if diff != 0 and len(found.changed) < MAX_CHANGED:
            found.changed.append(CaseValues(case=case, a=value_a.value, b=value_b.value))
    paired = paired_stats(diffs, confidence)
    found.n, found.mean_delta, found.p_value, found.exact = paired.n, paired.mean_delta, paired.p_value, paired.exact
    found.ci_low, found.ci_high = paired.ci_low, paired.ci_high
    found.better, found.worse, found.same = paired.better, paired.worse, paired.same
    if paired.n:
        kind = "exact McNemar" if is_bool else "exact"
        found.test = f"paired sign-flip ({kind if paired.exact else 'Monte Carlo'})"
    found.degraded = found.delta is not None and found.delta < -tolerance
    found.significant = paired.p_value is not None and paired.p_value < alpha
    direction = paired.mean_delta or 0.0
    if found.degraded or (found.significant and direction < 0):
        found.verdict = "regressed"
    elif (found.delta is not None and found.delta > tolerance) or (found.significant and direction > 0):
        found.verdict = "improved"
    elif paired.n or found.delta is not None:
        found.verdict = "no significant change"
    return found


def compare_results(a: RunResults, b: RunResults, *, compared_at: str = "", alpha: float = DEFAULT_ALPHA,
                    tolerance: float = DEFAULT_TOLERANCE, confidence: float = DEFAULT_CONFIDENCE) -> Comparison:
    """The comparison of run A (under test) with its baseline B, judge by judge."""
    cases_a, cases_b = list(a.per_case), list(b.per_case)
    in_b = set(cases_b)
    paired = [case for case in cases_a if case in in_b]
    judges = list(a.judges) + [name for name in b.judges if name not in a.judges]
    comparison = Comparison(
        run_a=a.ref, run_b=b.ref, compared_at=compared_at, alpha=alpha, tolerance=tolerance, confidence=confidence,
        paired_cases=len(paired),
        only_in_a=[case for case in cases_a if case not in in_b],
        only_in_b=[case for case in cases_b if case not in set(cases_a)],
        judges={name: compare_judge(name, a, b, paired, alpha=alpha, tolerance=tolerance, confidence=confidence)
                for name in judges if name != "pairwise"},
    )
    if not paired:
        comparison.warnings.append("the two runs have no case in common: nothing was paired")
    for name, judge in comparison.judges.items():
        if not judge.in_a or not judge.in_b:
            comparison.warnings.append(f"judge {name!r} is only in {'run A' if judge.in_a else 'the baseline (B)'}")
    return comparison
