"""Reducing samples and aggregating cases."""

from __future__ import annotations

from agent_eval_sandbox.judges.aggregate import aggregate, majority, reduce_samples
from agent_eval_sandbox.judges.results import CaseResult, Sample


def _s(value: object = None, rationale: str = "", error: str | None = None) -> Sample:
    return Sample(value=value, rationale=rationale or f"r{value}", error=error)  # type: ignore[arg-type]


class TestSamples:
    def test_one_sample_is_the_result(self) -> None:
        assert reduce_samples("llm", [_s(4)]) == CaseResult.scored("llm", 4, "r4")
        assert reduce_samples("llm", [_s(error="boom")]).status == "error"

    def test_numbers_reduce_to_median_low(self) -> None:
        result = reduce_samples("llm", [_s(5), _s(1), _s(3), _s(4)])
        assert result.value == 3 and result.rationale == "r3"
        assert result.stability.min == 1 and result.stability.max == 5 and result.stability.stable is False
        assert result.sample_rationales is not None and len(result.sample_rationales) == 4

    def test_booleans_need_a_strict_majority_and_ties_fail(self) -> None:
        assert majority([True, True, False]) is True
        assert majority([True, False]) is False
        tie = reduce_samples("llm", [_s(True), _s(False)])
        assert tie.value is False and tie.rationale == "rFalse" and tie.stability.pass_count == 1
        assert reduce_samples("llm", [_s(True), _s(True), _s(False)]).value is True

    def test_agreeing_samples_are_stable(self) -> None:
        result = reduce_samples("llm", [_s(True), _s(True), _s(True)])
        assert result.value is True and result.stability.stable and result.sample_rationales is None

    def test_errored_samples_are_left_out_but_counted(self) -> None:
        result = reduce_samples("llm", [_s(True), _s(error="off-scale"), _s(True)])
        assert result.value is True and result.stability.error_count == 1 and result.stability.stable is False
        one_each = reduce_samples("llm", [_s(True), _s(False), _s(error="x")])
        assert one_each.value is False  # 1 of 2 is a tie

    def test_all_samples_failing_is_an_error(self) -> None:
        result = reduce_samples("llm", [_s(error="a"), _s(error="b")])
        assert result.status == "error" and result.error == "all 2 samples failed; the first: a"
        assert result.value is None and result.stability.error_count == 2

    def test_mixed_types_are_an_error(self) -> None:
        assert reduce_samples("llm", [_s(True), _s(3)]).status == "error"


def _cases(*values: object, errors: int = 0, skips: int = 0) -> list[CaseResult]:
    results = [CaseResult.scored("check", v, "") for v in values]  # type: ignore[arg-type]
    results += [CaseResult.errored("check", "e")] * errors
    results += [CaseResult.skipped("check", "s")] * skips
    return results


class TestAggregate:
    def test_booleans_give_a_pass_rate_mirrored_by_the_mean(self) -> None:
        stats = aggregate("check", _cases(True, True, False, True, errors=1, skips=2))
        assert stats.pass_rate == 0.75 and stats.mean == 0.75
        assert (stats.scored_cases, stats.errored_cases, stats.skipped_cases, stats.total_cases) == (4, 1, 2, 7)
        assert stats.error_rate == 1 / 7 and stats.status == "OK"

    def test_numbers_give_a_mean_only(self) -> None:
        stats = aggregate("llm", _cases(1, 2, 4.5), score_range=(1, 5), feedback_type="float")
        assert stats.mean == 2.5 and stats.pass_rate is None
        assert stats.score_range == (1, 5) and stats.feedback_type == "float"

    def test_a_mix_gives_neither(self) -> None:
        stats = aggregate("check", _cases(True, 3))
        assert stats.mean is None and stats.pass_rate is None and stats.status == "OK"

    def test_status_is_error_or_skip_when_nothing_scored(self) -> None:
        assert aggregate("check", _cases(errors=2, skips=1)).status == "ERROR"
        assert aggregate("check", _cases(skips=3)).status == "SKIP"
        assert aggregate("check", []).error_rate is None

    def test_stability_counts_stable_cases(self) -> None:
        stable = reduce_samples("llm", [_s(4), _s(4), _s(4)])
        unstable = reduce_samples("llm", [_s(4), _s(2), _s(4)])
        stats = aggregate("llm", [stable, unstable, CaseResult.skipped("llm", "s")])
        assert stats.stability is not None
        assert (stats.stability.samples, stats.stability.stable_cases, stats.stability.total_cases) == (3, 1, 2)
        assert aggregate("check", _cases(True)).stability is None
