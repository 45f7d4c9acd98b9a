"""Validating the hook model's answer for `compile-handlers --llm` (stage 2)."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.interception.handlers import Handler, HandlersError
from agent_eval_sandbox.interception.refine import (
    needs_refinement,
    parse_refinement,
)

JIRA = Handler(match="Any Jira interaction", patterns=["Bash", "mcp__atlassian__*"], prompt="test instances only")


def test_a_good_answer_fills_filters_and_lowercased_checks():
    reply = '{"input_filters": ["jira", "JIRA_SERVER"], "env_checks": {"JIRA_SERVER": {"must_contain": ["LocalHost", "test"]}}}'
    refined = parse_refinement(reply, JIRA, 1, "eval.yaml")
    assert refined.input_filters == ["jira", "JIRA_SERVER"]
    assert refined.env_checks["JIRA_SERVER"].must_contain == ["localhost", "test"]
    assert (refined.match, refined.patterns, refined.prompt) == (JIRA.match, JIRA.patterns, JIRA.prompt)


def test_a_fenced_answer_is_accepted():
    refined = parse_refinement('```json\n{"input_filters": ["jira"]}\n```', JIRA, 0, "eval.yaml")
    assert refined.input_filters == ["jira"] and refined.env_checks == {}


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (None, "has no text"),
        ("Sure! Here you go: input_filters=jira", "is not JSON"),
        ('["jira"]', "is not an object with only input_filters and env_checks"),
        ('{"input_filters": ["jira"], "patterns": ["*"]}', "is not an object with only"),
        ('{"input_filters": "jira"}', "input_filters for handler 1 .* is not a list of strings"),
        ('{"input_filters": [""]}', "is not a list of strings"),
        ('{"input_filters": ["jira("]}', r"has an invalid regex 'jira\(': missing \)"),
        ('{"env_checks": ["JIRA_SERVER"]}', "env_checks for handler 1 .* is not a mapping"),
        ('{"env_checks": {"JIRA_SERVER": ["test"]}}', r"env_checks.JIRA_SERVER .* is not \{must_contain: \[strings\]\}"),
        ('{"env_checks": {"JIRA_SERVER": {"must_contain": "test"}}}', "is not {must_contain"),
        ('{"env_checks": {"JIRA_SERVER": {"must_contain": ["t"], "other": 1}}}', "is not {must_contain"),
    ],
)
def test_bad_answers_are_one_clear_error(reply, problem):
    with pytest.raises(HandlersError, match=problem) as info:
        parse_refinement(reply, JIRA, 1, "eval.yaml")
    assert "\n" not in str(info.value)
    assert "handler 1 ('Any Jira interaction')" in str(info.value)


def test_only_gating_handlers_are_refined():
    assert needs_refinement(JIRA)
    assert needs_refinement(Handler(patterns=["*"]))
    assert not needs_refinement(Handler(patterns=["AskUserQuestion"]))
    assert not needs_refinement(Handler(patterns=[]))
