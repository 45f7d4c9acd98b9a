"""Reductions (pure): N samples of a case to one result, and a judge's cases to statistics."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from agent_eval_sandbox.judges.results import (
    CaseResult,
    JudgeStats,
    JudgeStatus,
    Sample,
    Stability,
    StabilityStats,
    Value,
)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def majority(values: Sequence[bool]) -> bool:
    """Strict majority; a tie fails."""
    return sum(values) * 2 > len(values)


def reduce_samples(judge_type: str, samples: Sequence[Sample]) -> CaseResult:
    """One case's result from its samples: median_low of numbers, majority of booleans.

    Errored samples are left out of the reduction and counted in the
    stability; a case whose samples all errored is an error.
    """
    if len(samples) == 1:
        return CaseResult.from_sample(judge_type, samples[0])
    good = [s for s in samples if s.error is None and s.value is not None]
    errors = len(samples) - len(good)
    values: list[Value] = [s.value for s in good if s.value is not None]
    if not values:
        first = next((s.error for s in samples if s.error), "no value")
        result = CaseResult.errored(judge_type, f"all {len(samples)} samples failed; the first: {first}")
        result.stability = Stability(samples=len(samples), error_count=errors, values=[], stable=False)
        result.sample_rationales = list(samples)
        return result
    if all(isinstance(v, bool) for v in values):
        passes = sum(1 for v in values if v)
        value: Value = majority([bool(v) for v in values])
        stability = Stability(
            samples=len(samples), error_count=errors, values=values, pass_count=passes,
            stable=errors == 0 and passes in (0, len(values)),
        )
    elif all(_is_number(v) for v in values):
        value = statistics.median_low(values)
        stability = Stability(
            samples=len(samples), error_count=errors, values=values,
            min=min(values), max=max(values), mean=round(statistics.fmean(values), 4),
            stable=errors == 0 and min(values) == max(values),
        )
    else:
        result = CaseResult.errored(judge_type, "the samples returned a mix of booleans and numbers")
        result.sample_rationales = list(samples)
        return result
    # Keep a rationale that agrees with the reduced value.
    rationale = next((s.rationale for s in good if s.value == value), good[0].rationale)
    result = CaseResult.scored(judge_type, value, rationale)
    result.stability = stability
    if not stability.stable:
        result.sample_rationales = list(samples)
    return result


def not_run_floor(score_range: tuple[float, float] | None) -> float:
    """What a case that never ran counts as in a numeric judge's mean: the bottom of its scale."""
    return float(score_range[0]) if score_range is not None else 0.0


def aggregate(
    judge_type: str,
    results: Sequence[CaseResult],
    *,
    score_range: tuple[float, float] | None = None,
    feedback_type: str | None = None,
) -> JudgeStats:
    """A judge's statistics over all cases of the run.

    Booleans give a pass_rate (and mean mirrors it), numbers a mean; a mix
    gives neither. A case that never ran (`not_run`) counts as failing: a
    false verdict in the pass rate, the bottom of the scale (`not_run_floor`)
    in the mean, so the denominator is every case the judge applies to.
    Skipped cases (a false `if:`) and judge errors contribute no value; with
    no value at all there is no metric (a gate on it fails). error_rate is
    errors plus never-ran cases over every case: how much of the dataset the
    judge did not score.
    """
    scored = [r for r in results if r.status == "scored" and r.value is not None]
    errored = sum(1 for r in results if r.status == "error")
    not_run = sum(1 for r in results if r.status == "not_run")
    values = [r.value for r in scored if r.value is not None]  # (`scored` holds no None; this tells mypy)
    mean = pass_rate = None
    if values and all(isinstance(v, bool) for v in values):
        pass_rate = mean = sum(1 for v in values if v) / (len(values) + not_run)
    elif values and all(_is_number(v) for v in values):
        mean = statistics.fmean([float(v) for v in values] + [not_run_floor(score_range)] * not_run)
    sampled = [r.stability for r in scored if r.stability is not None and r.stability.samples > 1]
    stability = (
        StabilityStats(
            samples=sampled[0].samples, stable_cases=sum(1 for s in sampled if s.stable), total_cases=len(sampled)
        )
        if sampled
        else None
    )
    skipped = sum(1 for r in results if r.status == "skipped")
    status: JudgeStatus = "OK"
    if not scored:
        # The judge's own errors first, then its skips; a judge whose cases all never ran is an ERROR too.
        status = "ERROR" if errored or (not_run and not skipped) else "SKIP"
    return JudgeStats(
        judge_type=judge_type,
        mean=mean,
        pass_rate=pass_rate,
        error_rate=(errored + not_run) / len(results) if results else None,
        scored_cases=len(scored),
        errored_cases=errored,
        skipped_cases=skipped,
        not_run_cases=not_run,
        incomplete_cases=sum(1 for r in scored if r.incomplete),
        total_cases=len(results),
        status=status,
        stability=stability,
        score_range=score_range,
        feedback_type=feedback_type,
    )
