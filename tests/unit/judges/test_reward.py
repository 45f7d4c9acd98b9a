"""Each case's reward, per mode of `reward:`, and its edge cases (judges/reward.py, judges/formula.py)."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.config.models import RewardConfig
from agent_eval_sandbox.judges.formula import FormulaError, evaluate_formula
from agent_eval_sandbox.judges.results import CaseResult, JudgeMeta
from agent_eval_sandbox.judges.reward import compose_reward, reward_record, summarize_rewards

METAS = {
    "quality": JudgeMeta("quality", "llm", (1.0, 5.0)),
    "efficiency": JudgeMeta("efficiency", "check"),
    "passed": JudgeMeta("passed", "check"),
    "ten": JudgeMeta("ten", "llm", (0.0, 10.0)),
}


def _reward(block: dict, results: dict[str, CaseResult], *, never_ran: bool = False):
    return compose_reward(RewardConfig.model_validate(block), METAS, results, never_ran=never_ran)


def ok(value: bool | float, kind: str = "check") -> CaseResult:
    return CaseResult.scored(kind, value, "")


ALL_GOOD = {"quality": ok(4.0, "llm"), "efficiency": ok(0.5), "passed": ok(True), "ten": ok(5.0, "llm")}


# --- single judge ---

def test_single_judge_is_clamped_as_is_without_normalize():
    assert _reward({"judge": "efficiency"}, ALL_GOOD).reward == 0.5
    assert _reward({"judge": "quality"}, ALL_GOOD).reward == 1.0  # 4 clamped to 1: what the load warning says


def test_single_judge_with_normalize_maps_from_its_own_range():
    assert _reward({"judge": "quality", "normalize": True}, ALL_GOOD).reward == pytest.approx(0.75)
    assert _reward({"judge": "ten", "normalize": True}, ALL_GOOD).reward == pytest.approx(0.5)


def test_single_judge_without_a_value_is_zero_with_the_reason():
    for result in (CaseResult.errored("llm", "boom"), CaseResult.skipped("llm", "if: false")):
        found = _reward({"judge": "quality"}, {**ALL_GOOD, "quality": result})
        assert found.reward == 0.0 and "has no value" in (found.note or "")
    assert _reward({"judge": "quality"}, {}).reward == 0.0  # no result at all


def test_single_judge_does_not_gate_by_default_but_can():
    failing = {**ALL_GOOD, "passed": ok(False)}
    assert _reward({"judge": "efficiency"}, failing).reward == 0.5
    gated = _reward({"judge": "efficiency", "gate": True}, failing)
    assert gated.reward == 0.0 and "'passed'" in (gated.note or "")


# --- weighted ---

def test_weighted_mean_of_normalized_contributions():
    found = _reward({"formula": "weighted", "weights": {"quality": 3, "efficiency": 1}, "raw": ["efficiency"]},
                    ALL_GOOD)
    assert found.reward == pytest.approx((3 * 0.75 + 1 * 0.5) / 4) and found.note is None


def test_weighted_drops_a_judge_without_a_value_and_renormalizes():
    results = {**ALL_GOOD, "quality": CaseResult.errored("llm", "off scale")}
    found = _reward({"formula": "weighted", "weights": {"quality": 3, "efficiency": 1}, "raw": ["efficiency"]},
                    results)
    assert found.reward == pytest.approx(0.5) and "quality" in (found.note or "")


def test_weighted_gates_on_any_false_boolean_by_default():
    results = {**ALL_GOOD, "passed": ok(False)}
    assert _reward({"weights": {"quality": 1}}, results).reward == 0.0
    assert _reward({"weights": {"quality": 1}, "gate": False}, results).reward == pytest.approx(0.75)


def test_weighted_with_nothing_to_weigh_is_zero():
    found = _reward({"weights": {"quality": 1}}, {"quality": CaseResult.skipped("llm", "if")})
    assert found.reward == 0.0 and found.note


def test_the_deprecated_reward_range_applies_only_without_a_judge_range():
    metas_free = {"score": JudgeMeta("score", "check")}
    config = RewardConfig.model_validate({"weights": {"score": 1}, "score_range": [0, 4]})
    assert compose_reward(config, metas_free, {"score": ok(3.0)}).reward == pytest.approx(0.75)
    # with no range anywhere: [1, 5]
    plain = RewardConfig.model_validate({"weights": {"score": 1}})
    assert compose_reward(plain, metas_free, {"score": ok(3.0)}).reward == pytest.approx(0.5)


# --- expression ---

def test_expression_over_normalized_judge_values():
    found = _reward({"formula": "0.6 * quality + 0.4 * efficiency", "raw": ["efficiency"]}, ALL_GOOD)
    assert found.reward == pytest.approx(0.6 * 0.75 + 0.4 * 0.5)


def test_expression_with_assignments_calls_and_a_ternary():
    formula = "base = mean([quality, efficiency])\nmin(base, 1 if passed else 0)"
    found = _reward({"formula": formula, "raw": ["efficiency"], "gate": False}, ALL_GOOD)
    assert found.reward == pytest.approx((0.75 + 0.5) / 2)


def test_expression_naming_a_judge_without_a_value_degrades_to_zero_with_the_reason():
    results = {**ALL_GOOD, "quality": CaseResult.errored("llm", "boom")}
    found = _reward({"formula": "0.5 * quality + 0.5 * efficiency", "raw": ["efficiency"]}, results)
    assert found.reward == 0.0 and "'quality' has no value" in (found.note or "")


def test_expression_division_by_zero_degrades_to_zero():
    found = _reward({"formula": "quality / (efficiency - efficiency)", "raw": ["efficiency"]}, ALL_GOOD)
    assert found.reward == 0.0 and "division by zero" in (found.note or "")


def test_expression_result_is_clamped():
    assert _reward({"formula": "quality * 10"}, ALL_GOOD).reward == 1.0
    assert _reward({"formula": "-quality"}, ALL_GOOD).reward == 0.0


# --- the default composition (`reward: {}`) ---

def test_default_composition_gates_and_averages_numeric_judges():
    # quality 4 on [1, 5] is 0.75; efficiency 0.5 has no range, so [1, 5], below its bottom: 0; ten 5 on [0, 10]: 0.5
    assert _reward({}, ALL_GOOD).reward == pytest.approx((0.75 + 0.0 + 0.5) / 3)
    only_numbers = {"quality": ok(4.0, "llm"), "ten": ok(5.0, "llm")}
    assert _reward({}, only_numbers).reward == pytest.approx((0.75 + 0.5) / 2)
    assert _reward({}, {**only_numbers, "passed": ok(False)}).reward == 0.0


def test_default_composition_without_numbers_is_one_unless_a_judge_errored():
    assert _reward({}, {"passed": ok(True)}).reward == 1.0
    errored = _reward({}, {"passed": ok(True), "quality": CaseResult.errored("llm", "boom")})
    assert errored.reward == 0.0 and "quality" in (errored.note or "")
    assert _reward({}, {"quality": CaseResult.skipped("llm", "if")}).reward == 1.0  # a skip is not an error


# --- a case that never ran ---

@pytest.mark.parametrize("block", [{"judge": "efficiency"}, {"weights": {"quality": 1}}, {"formula": "1"}, {}])
def test_a_case_that_never_ran_gets_the_reward_of_a_failure_in_every_mode(block):
    found = _reward(block, ALL_GOOD, never_ran=True)
    assert found.reward == 0.0 and found.not_run and "never ran" in (found.note or "")


def test_the_summary_has_each_case_and_the_distribution():
    config = RewardConfig.model_validate({"judge": "efficiency"})
    per_case = {"a": {"efficiency": ok(0.25)}, "b": {"efficiency": ok(0.75)}, "c": {"efficiency": ok(1.0)},
                "d": {"efficiency": ok(1.0)}}
    summary = summarize_rewards(config, METAS, per_case, never_ran={"d"})
    assert {case: r.reward for case, r in summary.per_case.items()} == {"a": 0.25, "b": 0.75, "c": 1.0, "d": 0.0}
    assert summary.mean == pytest.approx(0.5) and summary.median == pytest.approx(0.5)
    assert (summary.min, summary.max, summary.cases, summary.not_run) == (0.0, 1.0, 4, 1)
    assert summary.histogram[0] == 1 and summary.histogram[2] == 1 and summary.histogram[7] == 1
    assert summary.histogram[9] == 1 and sum(summary.histogram) == 4
    assert summary.reward_config() == config
    data = summary.to_data()
    assert data["per_case"]["d"]["reward"] == 0.0 and data["per_case"]["d"]["not_run"] is True


def test_the_case_record_holds_the_reward_and_each_judge_value():
    reward = _reward({"judge": "efficiency"}, ALL_GOOD)
    record = reward_record(reward, {**ALL_GOOD, "x": CaseResult.errored("check", "boom")})
    assert record == {"reward": 0.5, "quality": 4.0, "efficiency": 0.5, "passed": 1.0, "ten": 5.0}


# --- the formula interpreter: no eval, only what the load-time check allows ---

@pytest.mark.parametrize(("formula", "expected"), [
    ("a + b * 2", 2.5), ("(a + b) / 2", 0.75), ("7 // 2 + 7 % 2", 4.0), ("max(a, b) - min([a, b])", 0.5),
    ("sum([a, b, 1])", 2.5), ("len([a, b])", 2.0), ("round(0.123456, 2)", 0.12), ("abs(a - b)", 0.5),
    ("1 if a < b <= 1 else 0", 1.0), ("a and b", 1.0), ("0 or b", 1.0), ("not a", 0.0), ("x = a\ny = x * 2\ny", 1.0),
    ("a == 0.5", 1.0), ("-a", -0.5),
])
def test_formula_values(formula, expected):
    assert evaluate_formula(formula, {"a": 0.5, "b": 1.0}) == pytest.approx(expected)


@pytest.mark.parametrize(("formula", "problem"), [
    ("a / 0", "division by zero"), ("missing + 1", "'missing' has no value"), ("mean([])", "mean() of nothing"),
    ("__import__('os')", "the formula"), ("a ** 2", "the formula"), ("'text'", "the formula"),
    ("[a, b] + 1", "needs a number, not a list"), ("len(a)", "len() takes one list"),
])
def test_formula_errors_are_formula_errors(formula, problem):
    with pytest.raises(FormulaError, match=None) as info:
        evaluate_formula(formula, {"a": 0.5, "b": 1.0})
    assert problem in str(info.value)


def test_a_not_run_judge_result_has_no_value_and_an_errored_default_is_zero():
    not_run = CaseResult.not_run("llm", "infra_error", "not judged")
    assert _reward({"judge": "quality"}, {"quality": not_run}).reward == 0.0
    found = _reward({}, {"passed": ok(True), "quality": not_run})
    assert found.reward == 0.0 and "quality" in (found.note or "")
