"""Judge values and model verdicts are validated before they count."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agent_eval_sandbox.config.models import JudgeConfig
from agent_eval_sandbox.judges.results import Sample
from agent_eval_sandbox.judges.verdict import (
    Scale,
    check_value,
    read_verdict,
    scale_for,
)


def _judge(**fields: Any) -> JudgeConfig:
    return JudgeConfig.model_validate({"name": "q", "prompt": "p", **fields})


def _call(tool_input: Any, name: str = "submit_score", **message: Any) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "id": "t", "name": name, "input": tool_input}], **message}


SCORE_1_5 = scale_for(_judge(score_range=[1, 5]))
BOOL = scale_for(_judge(feedback_type="bool"))


class TestScale:
    def test_feedback_type_and_bounds_choose_the_verdict(self) -> None:
        assert scale_for(_judge(feedback_type="bool")) == Scale(is_bool=True)
        assert scale_for(_judge()) == Scale(is_bool=False, low=1, high=5, declared=False, integer=True)
        assert scale_for(_judge(score_range=[0, 2.5])).integer is False
        assert scale_for(_judge(score_range=[0, 10])).integer is True
        assert scale_for(_judge(score_range=[0, 10], feedback_type="float")).integer is False
        assert scale_for(_judge(score_range=[0, 3], feedback_type="int")).integer is True
        assert scale_for(_judge(feedback_type="Literal['a']")).is_bool is False  # anything else: a score
        assert scale_for(_judge(score_range=[1, 5]), force_bool=True).is_bool is True

    def test_the_tool_schema_and_system_prompt_state_the_scale(self) -> None:
        tool = scale_for(_judge(score_range=[0, 2])).tool()
        assert tool["name"] == "submit_score"
        score = tool["input_schema"]["properties"]["score"]
        assert score == {"type": "integer", "minimum": 0, "maximum": 2, "description": "The score: an integer from 0 (worst) to 2 (best)."}
        assert tool["input_schema"]["required"] == ["rationale", "score"]
        assert tool["input_schema"]["additionalProperties"] is False
        assert "an integer from 0 (worst) to 2 (best)" in scale_for(_judge(score_range=[0, 2])).system_prompt()
        fractional = scale_for(_judge(score_range=[0, 2.5])).tool()["input_schema"]["properties"]["score"]
        assert fractional["type"] == "number" and fractional["maximum"] == 2.5
        assert BOOL.tool()["input_schema"]["properties"]["passed"]["type"] == "boolean"
        assert "submit_evaluation" in BOOL.system_prompt() and "untrusted" in BOOL.system_prompt()


class TestCheckValue:
    @pytest.mark.parametrize("value", [True, False, 0, 3, 2.5, -7])
    def test_bools_and_numbers_pass_without_a_range(self, value: Any) -> None:
        assert check_value(Sample(value=value), None).error is None

    def test_bounds_are_inclusive_and_never_clamped(self) -> None:
        assert check_value(Sample(value=5), (1, 5)).value == 5
        assert check_value(Sample(value=1), (1, 5)).value == 1
        rejected = check_value(Sample(value=7, rationale="r"), (1, 5))
        assert rejected.value is None and rejected.off_scale
        assert rejected.error == "returned 7, outside its declared score_range [1, 5]"
        assert check_value(Sample(value=-0.5), (-1, 1)).error is None
        assert "[0, 2.5]" in (check_value(Sample(value=2.6), (0, 2.5)).error or "")

    def test_non_finite_none_and_other_types_are_errors(self) -> None:
        assert check_value(Sample(value=math.nan), None).error == "returned nan, which is not a finite number"
        assert check_value(Sample(value=math.inf), (1, 5)).error == "returned inf, which is not a finite number"
        assert "returned no value (None)" in (check_value(Sample(value=None), None).error or "")
        bad = Sample.model_construct(value="high", rationale="", error=None, off_scale=False)
        assert check_value(bad, None).error == "returned 'high' (str); a judge's value must be a bool or a number"
        assert check_value(Sample.model_construct(value=[1], rationale="", error=None, off_scale=False), None).error.startswith("returned [1] (list)")

    def test_bool_values_ignore_the_scale(self) -> None:
        assert check_value(Sample(value=True), (1, 5)).value is True


class TestReadVerdict:
    def test_a_good_score_and_a_good_verdict(self) -> None:
        assert read_verdict(_call({"score": 4, "rationale": " solid "}), SCORE_1_5) == Sample(value=4, rationale="solid")
        assert read_verdict(_call({"passed": False, "rationale": "no"}, "submit_evaluation"), BOOL) == Sample(value=False, rationale="no")

    def test_rounding_follows_the_scale(self) -> None:
        assert read_verdict(_call({"score": 3.6, "rationale": "r"}), SCORE_1_5).value == 4
        assert read_verdict(_call({"score": 4.0, "rationale": "r"}), SCORE_1_5).value == 4
        fractional = scale_for(_judge(score_range=[0, 2.5]))
        assert read_verdict(_call({"score": 1.75, "rationale": "r"}), fractional).value == 1.75
        floats = scale_for(_judge(score_range=[1, 5], feedback_type="float"))
        assert read_verdict(_call({"score": 3.6, "rationale": "r"}), floats).value == 3.6

    def test_off_scale_after_rounding_is_an_error_but_only_when_declared(self) -> None:
        assert read_verdict(_call({"score": 5.6, "rationale": "r"}), SCORE_1_5).error == "returned 6, outside its declared score_range [1, 5]"
        assert read_verdict(_call({"score": 9, "rationale": "r"}), scale_for(_judge())).value == 9

    @pytest.mark.parametrize(
        ("message", "error"),
        [
            ("just text", "unparsable judge reply: not a Messages API message"),
            ({"content": "x"}, "unparsable judge reply"),
            ({"content": [{"type": "text", "text": "I think 4/5"}]}, "did not call submit_score: it wrote 'I think 4/5'"),
            ({"content": [{"type": "tool_use", "name": "other", "input": {}}], "stop_reason": "max_tokens"},
             "did not call submit_score: it called other; the answer was cut off at max_tokens"),
            ({"content": []}, "did not call submit_score: the reply was empty"),
            ({"content": [{"type": "tool_use", "name": "submit_score", "input": {"score": 1, "rationale": ""}}] * 2},
             "called submit_score 2 times"),
            (_call("{score: 4"), "unparsable verdict: submit_score input is not JSON"),
            (_call([4, "r"]), "unparsable verdict: submit_score input is a list, not an object"),
            (_call({"score": 4}), "the verdict is missing 'rationale'"),
            (_call({"rationale": "r"}), "the verdict is missing 'score'"),
            (_call({"score": 4, "rationale": "r", "confidence": 0.9}), "the verdict has unexpected key(s) 'confidence'"),
            (_call({"score": "4", "rationale": "r"}), "'score' must be a number, got '4' (str)"),
            (_call({"score": True, "rationale": "r"}), "'score' must be a number, got True (bool)"),
            (_call({"score": None, "rationale": "r"}), "'score' must be a number, got None (NoneType)"),
            (_call({"score": 4, "rationale": 12}), "'rationale' must be a string, got 12 (int)"),
        ],
    )
    def test_malformed_score_replies_fail_with_the_reason(self, message: Any, error: str) -> None:
        sample = read_verdict(message, SCORE_1_5)
        assert sample.value is None
        assert sample.error is not None and error in sample.error

    @pytest.mark.parametrize(
        ("tool_input", "error"),
        [
            ({"passed": "yes", "rationale": "r"}, "'passed' must be true or false, got 'yes' (str)"),
            ({"passed": 1, "rationale": "r"}, "'passed' must be true or false, got 1 (int)"),
            ({"score": 5, "rationale": "r"}, "the verdict is missing 'passed'"),
        ],
    )
    def test_malformed_bool_verdicts_fail(self, tool_input: Any, error: str) -> None:
        sample = read_verdict(_call(tool_input, "submit_evaluation"), BOOL)
        assert sample.value is None and error in (sample.error or "")

    def test_json_string_input_is_parsed_then_validated(self) -> None:
        assert read_verdict(_call('{"score": 2, "rationale": "r"}'), SCORE_1_5).value == 2

    def test_non_finite_scores_are_errors(self) -> None:
        assert "finite" in (read_verdict(_call({"score": math.nan, "rationale": "r"}), SCORE_1_5).error or "")
