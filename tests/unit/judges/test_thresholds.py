"""Thresholds against judge statistics, and the REGRESSIONS lines."""

from __future__ import annotations

from agent_eval_sandbox.config.models import ThresholdConfig
from agent_eval_sandbox.judges.results import JudgeStats
from agent_eval_sandbox.judges.thresholds import (
    evaluate_thresholds,
    exit_code,
    regression_lines,
)


def _stats(**fields: object) -> JudgeStats:
    base = {"judge_type": "check", "scored_cases": 10, "total_cases": 10, "error_rate": 0.0, "status": "OK"}
    return JudgeStats.model_validate({**base, **fields})


def _gates(**fields: float) -> ThresholdConfig:
    return ThresholdConfig(**fields)


def test_equality_passes_for_every_key() -> None:
    stats = {"b": _stats(pass_rate=0.9, mean=0.9, error_rate=0.2), "n": _stats(mean=3.5)}
    checks = evaluate_thresholds(stats, {"b": _gates(min_pass_rate=0.9, min_mean=0.9, max_error_rate=0.2), "n": _gates(min_mean=3.5)})
    assert [c.passed for c in checks] == [True, True, True, True]
    assert exit_code(checks) == 0 and regression_lines(checks) == ["REGRESSIONS: 0"]


def test_misses_are_regressions_in_the_reference_format() -> None:
    stats = {"output_quality": _stats(mean=3.1), "has_content": _stats(pass_rate=0.8, mean=0.8, error_rate=0.3)}
    checks = evaluate_thresholds(stats, {"output_quality": _gates(min_mean=3.5),
                                         "has_content": _gates(min_pass_rate=1.0, max_error_rate=0.2)})
    assert regression_lines(checks) == [
        "REGRESSIONS: 3 detected",
        "  [output_quality] mean: >= 3.5 -> 3.1",
        "  [has_content] pass_rate: >= 1.0 -> 0.8",
        "  [has_content] error_rate: <= 0.2 -> 0.3",
    ]
    assert exit_code(checks) == 1


def test_a_missing_metric_is_a_regression_naming_its_cause() -> None:
    stats = {
        "numeric": _stats(mean=4.0),
        "skipped": _stats(scored_cases=0, skipped_cases=10, status="SKIP"),
        "errored": _stats(scored_cases=0, errored_cases=12, total_cases=12, error_rate=1.0, status="ERROR"),
        "boolean": _stats(pass_rate=1.0, mean=1.0),
    }
    checks = evaluate_thresholds(stats, {
        "numeric": _gates(min_pass_rate=0.9),
        "skipped": _gates(min_mean=3.0),
        "errored": _gates(min_pass_rate=0.9),
        "boolean": _gates(min_win_rate=0.6),
    })
    assert all(not c.passed and c.actual_text == "n/a" for c in checks)
    assert [c.detail for c in checks] == [
        "pass_rate unavailable — judge skipped for all cases or not a boolean judge",
        "mean unavailable — judge skipped for all cases or not a numeric judge",
        "pass_rate unavailable — judge errored on 12 cases; see the per-case rationales",
        "win_rate unavailable — not a pairwise judge or no comparisons recorded",
    ]
    assert checks[0].line() == "[numeric] pass_rate: >= 0.9 -> n/a   pass_rate unavailable — judge skipped for all cases or not a boolean judge"


def test_partial_errors_still_give_a_mean_and_max_error_rate_gates_them() -> None:
    stats = {"q": _stats(mean=4.0, scored_cases=2, errored_cases=8, error_rate=0.8)}
    checks = evaluate_thresholds(stats, {"q": _gates(min_mean=3.5, max_error_rate=0.2)})
    assert [c.passed for c in checks] == [True, False]


def test_thresholds_for_judges_without_results_are_ignored() -> None:
    assert evaluate_thresholds({}, {"ghost": _gates(min_mean=1)}) == []
    assert evaluate_thresholds({"a": _stats(mean=1.0)}, {"a": _gates()}) == []
