"""The pairwise judge: both orders asked, the reference's verdict rule, no call for a case that never ran."""

from __future__ import annotations

from typing import Any

import pytest

from agent_eval_sandbox.compare.pairwise import (
    TOOL_NAME,
    Pair,
    PairwiseJudge,
    comparison_prompt,
    judge_pair,
    read_preference,
    run_pairwise,
    winner,
)
from agent_eval_sandbox.config.models import JudgeConfig


class FakeModel:
    """Answers each ask with the next scripted preference (or error string), keeping the prompts."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def ask(self, prompt: str, *, system: str, tool: Any, model: str) -> Any:
        self.prompts.append(prompt)
        answer = self.answers.pop(0)
        if answer.startswith("!"):
            return answer[1:]
        return {"content": [{"type": "tool_use", "name": TOOL_NAME,
                             "input": {"preferred": answer, "reasoning": f"because {answer}"}}]}


def _judge(template: str = "Compare for {{ inputs }}.", model: str | None = "m", broken: str | None = None):
    return PairwiseJudge(JudgeConfig(name="pairwise", prompt=template), template, model, broken)


def _record(text: str) -> dict[str, Any]:
    return {"inputs": {"name": "Ada"}, "files": {"out.md": text}, "conversation": f"done: {text}"}


RUN, BASE = _record("RUN-OUTPUT"), _record("BASELINE-OUTPUT")


@pytest.mark.parametrize(("ab", "ba", "expected"), [
    ("A", "B", "A"), ("B", "A", "B"), ("A", "A", "tie"), ("B", "B", "tie"), ("tie", "B", "tie"),
    ("tie", "tie", "tie"), (None, "B", "error"), ("A", None, "error"),
])
def test_the_verdict_rule(ab, ba, expected):
    assert winner(ab, ba) == expected


def test_both_orders_are_asked_with_the_outputs_swapped():
    model = FakeModel(["A", "B"])
    found = judge_pair(_judge(), model, Pair("c1", RUN, BASE))  # type: ignore[arg-type]
    assert found.winner == "A" and (found.pref_ab, found.pref_ba) == ("A", "B")
    first, second = model.prompts
    assert first.index("RUN-OUTPUT") < first.index("BASELINE-OUTPUT")
    assert second.index("BASELINE-OUTPUT") < second.index("RUN-OUTPUT")
    assert "Compare for" in first and "Ada" in first
    assert found.reasoning_ab == "because A" and found.reasoning_ba == "because B"


def test_a_judge_that_always_picks_the_first_slot_gives_a_tie_not_a_win():
    found = judge_pair(_judge(), FakeModel(["A", "A"]), Pair("c1", RUN, BASE))  # type: ignore[arg-type]
    assert found.winner == "tie"


def test_a_failed_call_in_either_order_is_an_error_never_a_win():
    found = judge_pair(_judge(), FakeModel(["A", "!the judge model call failed"]),  # type: ignore[arg-type]
                       Pair("c1", RUN, BASE))
    assert found.winner == "error" and found.pref_ab == "A" and "call failed" in (found.error or "")


def test_a_case_that_never_ran_is_not_judged_and_costs_nothing():
    model = FakeModel([])
    found = judge_pair(_judge(), model, Pair("c1", None, BASE))  # type: ignore[arg-type]
    assert found.winner == "not_run" and model.prompts == [] and "never ran in run A" in found.reasoning


def test_a_judge_without_a_model_errors_each_case_without_calling():
    model = FakeModel([])
    found = judge_pair(_judge(model=None, broken="no model for judge 'pairwise'"), model,  # type: ignore[arg-type]
                       Pair("c1", RUN, BASE))
    assert found.winner == "error" and model.prompts == []


def test_a_template_that_places_the_outputs_is_not_appended_to():
    template = "First {{ output_a }} then {{ output_b }}"
    prompt = comparison_prompt(template, RUN, {}, "X-SIDE", "Y-SIDE")
    assert prompt == "First X-SIDE then Y-SIDE"
    appended = comparison_prompt("Judge these.", RUN, {}, "X-SIDE", "Y-SIDE")
    assert appended.index("<output_a>\nX-SIDE") < appended.index("<output_b>\nY-SIDE")


@pytest.mark.parametrize(("reply", "problem"), [
    ({"content": []}, "0 times"),
    ({"content": [{"type": "tool_use", "name": TOOL_NAME, "input": {"preferred": "C", "reasoning": ""}}]},
     "must be A, B or tie"),
    ("not a message", "not a Messages API message"),
])
def test_unusable_replies_say_why(reply, problem):
    found = read_preference(reply)
    assert isinstance(found, str) and problem in found


def test_preference_is_read_case_insensitively():
    reply = {"content": [{"type": "tool_use", "name": TOOL_NAME, "input": {"preferred": " Tie ", "reasoning": "x"}}]}
    assert read_preference(reply) == ("tie", "x")


def test_the_tally_counts_every_case_in_the_win_rate():
    model = FakeModel(["A", "B", "B", "A", "A", "A", "!boom", "B"])
    pairs = {f"c{i}": Pair(f"c{i}", RUN, BASE) for i in range(4)}
    pairs["c4"] = Pair("c4", RUN, None)
    summary = run_pairwise(_judge(), model, list(pairs), pairs.__getitem__,  # type: ignore[arg-type]
                           run_a="run", run_b="base")
    assert [c.winner for c in summary.per_case] == ["A", "B", "tie", "error", "not_run"]
    assert (summary.wins_a, summary.wins_b, summary.ties, summary.errors, summary.not_run) == (1, 1, 1, 1, 1)
    assert summary.cases_compared == 5 and summary.win_rate == pytest.approx(0.2)
    assert len(model.prompts) == 8
