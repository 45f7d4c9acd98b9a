"""`if:` expressions."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.judges.condition import (
    ConditionError,
    condition_syntax_error,
    evaluate_condition,
)

OUTPUTS = {"annotations": {"category": "navigation"}, "files": {"a.md": "x"}, "cost_usd": 0.5}


def test_true_and_false() -> None:
    assert evaluate_condition("annotations.get('category') == 'navigation'", OUTPUTS) is True
    assert evaluate_condition("not outputs['files']", OUTPUTS) is False
    assert evaluate_condition("outputs.get('cost_usd', 0) < 1", OUTPUTS) is True


def test_a_raising_condition_is_an_error_not_a_skip() -> None:
    with pytest.raises(ConditionError, match="condition \"annotations\\['tier'\\]\" raised KeyError"):
        evaluate_condition("annotations['tier']", OUTPUTS)


def test_there_are_no_builtins() -> None:
    with pytest.raises(ConditionError, match="NameError"):
        evaluate_condition("len(outputs['files']) > 0", OUTPUTS)
    with pytest.raises(ConditionError, match="NameError"):
        evaluate_condition("__import__('os')", OUTPUTS)


def test_syntax() -> None:
    assert condition_syntax_error("a ==") is not None
    assert condition_syntax_error("annotations.get('x')") is None
    with pytest.raises(ConditionError, match="SyntaxError"):
        evaluate_condition("a ==", OUTPUTS)
