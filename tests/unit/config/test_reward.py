"""`reward:` at load time: the two modes, names of judges, ranges, the formula's syntax rules and warnings."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.reward_formula import MAX_NODES, formula_names, formula_problem
from agent_eval_sandbox.errors import ConfigError

JUDGES = """
judges:
  - {name: quality, prompt: p, score_range: [1, 5]}
  - {name: efficiency, check: "return 0.5, ''"}
  - {name: passed, check: "return True, ''"}
  - {name: pairwise, prompt: compare}
"""


def _load(write_eval, reward: str):
    return load_eval_config(write_eval(f"{JUDGES}\nreward: {reward}\n"))


def _refused(write_eval, reward: str, *needles: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(write_eval, reward)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


@pytest.mark.parametrize(("reward", "mode", "gates"), [
    ("{judge: quality, normalize: true}", "judge", False),
    ("{judge: passed, gate: true}", "judge", True),
    ("{formula: weighted, weights: {quality: 0.7, efficiency: 0.3}, raw: [efficiency]}", "weighted", True),
    ("{weights: {quality: 1}}", "weighted", True),
    ("{formula: '0.6 * quality + 0.4 * efficiency', raw: [efficiency], gate: false}", "expression", False),
    ("{formula: \"base = mean([quality, efficiency])\\nmin(base, 1 if passed else 0)\"}", "expression", True),
    ("{formula: 'max(quality, efficiency) if passed and not quality < 2 else -1 // 2 % 3'}", "expression", True),
    ("{}", "weighted", True),
])
def test_valid_reward_blocks_load(write_eval, reward, mode, gates):
    config = _load(write_eval, reward).config
    assert config.reward is not None and config.reward.mode == mode and config.reward.gates is gates


@pytest.mark.parametrize(("reward", "needles"), [
    ("{judge: quality, formula: weighted}", ["reward.judge cannot be combined with formula"]),
    ("{judge: quality, weights: {quality: 1}}", ["reward.judge cannot be combined with weights"]),
    ("{judge: quality, raw: [quality]}", ["reward.judge cannot be combined with raw"]),
    ("{judge: qualty}", ["reward.judge names 'qualty', which is no judge"]),
    ("{judge: pairwise}", ["reward.judge names 'pairwise', which is no judge"]),
    ("{judge: ''}", ["reward.judge must name a judge"]),
    ("{formula: '0.5 * qualty'}", ["reward.formula names 'qualty', which is no judge"]),
    ("{weights: {qualty: 1}}", ["reward.weights.qualty names 'qualty', which is no judge"]),
    ("{raw: [effciency]}", ["reward.raw[0] names 'effciency', which is no judge"]),
    ("{weights: {quality: -1}}", ["reward.weights.quality must be a non-negative number (got -1)"]),
    ("{weights: {quality: high}}", ["reward.weights.quality must be a non-negative number (got 'high')"]),
    ("{weights: {quality: true}}", ["reward.weights.quality must be a non-negative number"]),
    ("{weights: {quality: .nan}}", ["reward.weights.quality must be a non-negative number"]),
    ("{weights: [quality]}", ["reward.weights must be a mapping"]),
    ("{score_range: [5, 1]}", ["reward.score_range must be a two-element increasing numeric list"]),
    ("{score_range: 5}", ["reward.score_range must be a two-element"]),
    ("{normalize: sometimes}", ["reward.normalize must be true or false"]),
    ("{gate: sometimes}", ["reward.gate must be true or false"]),
    ("{formula: 'quality ** 2'}", ["reward.formula uses '**'"]),
    ("{formula: \"quality + 'a'\"}", ["reward.formula uses a string or bytes constant"]),
    ("{formula: 'quality.real'}", ["reward.formula uses attribute access"]),
    ("{formula: 'quality[0]'}", ["reward.formula uses a subscript"]),
    ("{formula: '__import__(1)'}", ["reward.formula calls something other than"]),
    ("{formula: 'exec(quality)'}", ["reward.formula calls something other than"]),
    ("{formula: 'round(quality, ndigits=2)'}", ["keyword arguments"]),
    ("{formula: '_x + quality'}", ["names starting with '_'"]),
    ("{formula: 'quality * 1e7'}", ["larger in magnitude than 1e+06"]),
    ("{formula: 'sum([q for q in [quality]])'}", ["a comprehension"]),
    ("{formula: 'lambda: quality'}", ["a lambda"]),
    ("{formula: 'quality | efficiency'}", ["'BitOr'"]),
    ("{formula: 'x = quality'}", ["must end with an expression"]),
    ("{formula: \"if quality:\\n  1\\nquality\"}", ["'If'"]),
    ("{formula: 'quality +'}", ["reward.formula is not a valid expression"]),
    ("{formula: ''}", ["reward.formula is empty"]),
])
def test_invalid_reward_blocks(write_eval, reward, needles):
    _refused(write_eval, reward, *needles)


def test_formula_size_limit():
    assert "syntax nodes" in (formula_problem(" + ".join(["1"] * MAX_NODES)) or "")
    assert formula_problem(" + ".join(["1"] * 20)) is None


def test_formula_names_are_free_names_less_calls_and_assignments():
    assert formula_names("base = mean([clarity, accuracy])\nmin(base, efficiency) + clarity") == [
        "clarity", "accuracy", "efficiency"]
    assert formula_names("a = a + 1\na") == ["a"]  # read before it is assigned: a judge


def test_load_time_warnings_of_the_reference(write_eval):
    judge_mode = _load(write_eval, "{judge: quality}").warnings
    assert any("reward.judge 'quality' declares score_range [1.0, 5.0] but 'normalize' is not set" in w
               and "every score at or above 1 becomes the maximum reward" in w for w in judge_mode)
    shadow = _load(write_eval, "{weights: {quality: 1, efficiency: 1}, score_range: [0, 10]}").warnings
    assert any("reward.score_range [0.0, 10.0] is deprecated and no longer normalizes 'quality' [1.0, 5.0]" in w
               and "It still applies to 'efficiency'" in w for w in shadow)
    quiet = _load(write_eval, "{weights: {quality: 1}, raw: [efficiency], score_range: [1, 5]}").warnings
    assert not any("deprecated" in w for w in quiet)
    assert any("reward.normalize only applies with reward.judge" in w
               for w in _load(write_eval, "{normalize: true, weights: {quality: 1}}").warnings)
    assert any("reward.weights are only used by formula: weighted" in w
               for w in _load(write_eval, "{formula: quality, weights: {quality: 1}}").warnings)
    assert not any("does not compute" in w for w in judge_mode)


def test_a_judge_on_a_narrow_scale_without_normalize_warns_it_can_never_reach_one(write_eval):
    warnings = load_eval_config(write_eval(
        "judges: [{name: q, prompt: p, score_range: [0, 0.5]}]\nreward: {judge: q}\n")).warnings
    assert any("it can never exceed 0.5" in w for w in warnings)
