"""Cases paired by id, judge by judge: what enters the paired test, what is listed, what regresses."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.compare.deltas import RunResults, compare_results
from agent_eval_sandbox.compare.models import Comparison, RunRef
from agent_eval_sandbox.judges.aggregate import aggregate
from agent_eval_sandbox.judges.results import CaseResult, JudgeStats


def _run(run_id: str, per_case: dict[str, dict[str, CaseResult]], never_ran: frozenset[str] = frozenset(),
         ranges: dict[str, tuple[float, float]] | None = None) -> RunResults:
    names = {name for results in per_case.values() for name in results}
    judges: dict[str, JudgeStats] = {}
    for name in sorted(names):
        results = [r[name] for r in per_case.values() if name in r]
        judges[name] = aggregate(results[0].judge_type, results, score_range=(ranges or {}).get(name))
    return RunResults(ref=RunRef(run_id=run_id, root=f"/runs/{run_id}"), judges=judges, per_case=per_case,
                      never_ran=never_ran)


def ok(value: bool | float) -> CaseResult:
    return CaseResult.scored("check", value, "")


def test_cases_are_paired_by_id_and_the_others_listed_not_dropped():
    a = _run("a", {"c1": {"j": ok(True)}, "c2": {"j": ok(False)}, "c4": {"j": ok(True)}})
    b = _run("b", {"c2": {"j": ok(True)}, "c1": {"j": ok(True)}, "c3": {"j": ok(True)}})
    found = compare_results(a, b)
    assert found.paired_cases == 2
    assert found.only_in_a == ["c4"] and found.only_in_b == ["c3"]
    judge = found.judges["j"]
    assert (judge.n, judge.worse, judge.same) == (2, 1, 1)
    assert [c.case for c in judge.changed] == ["c2"]
    assert judge.changed[0].a is False and judge.changed[0].b is True


def test_a_skip_leaves_the_case_unpaired_and_a_judge_error_counts_as_failing():
    a = _run("a", {"c1": {"j": CaseResult.errored("llm", "boom")}, "c2": {"j": CaseResult.skipped("llm", "if")},
                   "c3": {"j": ok(4.0)}})
    b = _run("b", {"c1": {"j": ok(3.0)}, "c2": {"j": ok(3.0)}, "c3": {"j": ok(2.0)}})
    judge = compare_results(a, b).judges["j"]
    assert judge.unpaired == {"c2": "skipped in A"}
    # c1: the bottom of the scale (0 without a score_range) against 3.0; c3: 4.0 against 2.0
    assert judge.n == 2 and judge.errored_a == 1 and judge.mean_delta == pytest.approx((-3.0 + 2.0) / 2)


def test_breaking_the_judge_never_compares_better_than_answering_wrong():
    """An agent whose outputs make its check judge raise (an unparsable file) once compared better than its
    baseline: the errors left the pass rate's denominator and the pairing (red team)."""
    baseline = _run("b", _verdicts([True, True, True, False]))
    wrong = _run("a", _verdicts([True, False, False, False]))
    broken = _run("a", {"c0": {"j": ok(True)}, **{f"c{i}": {"j": CaseResult.errored("check", "JSONDecodeError")}
                                                   for i in (1, 2, 3)}})
    by_wrong, by_broken = compare_results(wrong, baseline).judges["j"], compare_results(broken, baseline).judges["j"]
    assert by_broken.a == by_wrong.a == pytest.approx(0.25) and by_broken.delta == pytest.approx(-0.5)
    assert (by_broken.n, by_broken.worse, by_broken.verdict) == (by_wrong.n, by_wrong.worse, by_wrong.verdict)
    assert by_broken.errored_a == 3


def test_a_case_that_never_ran_counts_as_failing_in_its_run():
    a = _run("a", {"c1": {"j": ok(True)}, "c2": {"j": ok(True)}}, never_ran=frozenset({"c2"}))
    b = _run("b", {"c1": {"j": ok(True)}, "c2": {"j": ok(True)}})
    judge = compare_results(a, b).judges["j"]
    assert judge.n == 2 and judge.not_run_a == 1 and judge.not_run_b == 0 and judge.worse == 1


def test_a_numeric_case_that_never_ran_counts_as_the_bottom_of_the_scale():
    a = _run("a", {"c1": {"q": ok(5.0)}}, never_ran=frozenset({"c1"}), ranges={"q": (1.0, 5.0)})
    b = _run("b", {"c1": {"q": ok(4.0)}}, ranges={"q": (1.0, 5.0)})
    judge = compare_results(a, b).judges["q"]
    assert judge.changed[0].a == 1.0 and judge.mean_delta == pytest.approx(-3.0)


def _verdicts(values: list[bool]) -> dict[str, dict[str, CaseResult]]:
    return {f"c{i}": {"j": ok(v)} for i, v in enumerate(values)}


def test_a_large_drop_is_a_regression_by_the_reference_rule_even_when_not_significant():
    found = compare_results(_run("a", _verdicts([False, False, True])), _run("b", _verdicts([True, True, True])))
    judge = found.judges["j"]
    assert judge.delta == pytest.approx(-2 / 3) and judge.degraded and not judge.significant
    assert judge.verdict == "regressed" and found.regressed == ["j"]
    assert found.regression_lines() == [
        "[j] pass_rate_vs_baseline: 1.0 -> 0.3333   Degraded vs baseline (dropped by more than 0.5)"]


def test_a_significant_small_drop_is_a_regression_and_a_significant_rise_an_improvement():
    worse = [False] * 8 + [True] * 12
    better = [True] * 20
    down = compare_results(_run("a", _verdicts(worse)), _run("b", _verdicts(better))).judges["j"]
    assert not down.degraded and down.significant and down.p_value == pytest.approx(2 / 256)
    assert down.verdict == "regressed" and down.test == "paired sign-flip (exact McNemar)"
    up = compare_results(_run("a", _verdicts(better)), _run("b", _verdicts(worse))).judges["j"]
    assert up.verdict == "improved"
    same = compare_results(_run("a", _verdicts(better)), _run("b", _verdicts(better))).judges["j"]
    assert same.verdict == "no significant change" and same.p_value == 1.0


def test_a_judge_in_one_run_only_is_not_compared_and_warned():
    found = compare_results(_run("a", {"c1": {"j": ok(True), "new": ok(True)}}), _run("b", {"c1": {"j": ok(True)}}))
    assert found.judges["new"].verdict == "not compared" and not found.judges["new"].in_b
    assert any("'new' is only in run A" in w for w in found.warnings)


def test_no_common_case_is_warned():
    found = compare_results(_run("a", {"c1": {"j": ok(True)}}), _run("b", {"c2": {"j": ok(True)}}))
    assert found.paired_cases == 0 and any("no case in common" in w for w in found.warnings)


def test_the_comparison_round_trips_through_its_json():
    found = compare_results(_run("a", _verdicts([False, True])), _run("b", _verdicts([True, True])))
    again = Comparison.model_validate(found.to_data())
    assert again.judges["j"].p_value == found.judges["j"].p_value and again.only_in_a == found.only_in_a


def test_a_not_run_result_counts_as_failing_whatever_the_never_ran_set_says():
    not_run = CaseResult.not_run("check", "interrupted", "not judged: the case did not run")
    found = compare_results(_run("a", {"c1": {"j": not_run}}), _run("b", {"c1": {"j": ok(True)}}))
    judge = found.judges["j"]
    assert judge.not_run_a == 1 and judge.worse == 1 and judge.changed[0].a is False
