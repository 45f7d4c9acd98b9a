"""The broker's decision function, rule by rule, with a fake answerer."""

from __future__ import annotations

from typing import Any

import pytest

from agent_eval_sandbox.interception.decision import (
    AnswerRequest,
    CaseContext,
    MalformedEvent,
    ToolEvent,
    decide,
    resolve_label,
)
from agent_eval_sandbox.interception.handlers import parse_handlers

JIRA = {
    "match": "Any Jira interaction",
    "patterns": ["Bash", "mcp__atlassian__*"],
    "input_filters": ["jira", "JIRA_SERVER"],
    "env_checks": {"JIRA_SERVER": {"must_contain": ["localhost", "emulator", "test"]}},
}
ASK = {"match": "Questions via AskUserQuestion", "patterns": ["AskUserQuestion"], "prompt": "Prefer Normal."}
QUESTION = {
    "question": "What priority should this have?",
    "header": "Priority",
    "multiSelect": False,
    "options": [{"label": "High", "description": "urgent"}, {"label": "Normal", "description": "default"}],
}
CASE = CaseContext((("input.yaml", "title: x\n"), ("answers.yaml", "priority: Normal\n")))


def handlers(*entries: dict[str, Any], **top: Any):
    return parse_handlers({"handlers": list(entries), **top}, "tool_handlers.yaml")


def event(tool_name: str, tool_input: dict[str, Any] | None = None, tool_use_id: str = "toolu_1") -> ToolEvent:
    return ToolEvent(tool_name, tool_input or {}, tool_use_id)


class FakeAnswerer:
    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[AnswerRequest] = []

    def __call__(self, request: AnswerRequest) -> str:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def ask(*questions: dict[str, Any]) -> ToolEvent:
    return event("AskUserQuestion", {"questions": list(questions)})


# --- AskUserQuestion ---------------------------------------------------------------


def test_tier_1_an_exact_case_override_answers_without_the_model():
    answerer = FakeAnswerer()
    decision = decide(ask(QUESTION), handlers(ASK, case_overrides={QUESTION["question"]: "High"}), CASE, {}, answerer)
    assert decision.kind == "allow"
    assert decision.updated_input == {"questions": [QUESTION], "answers": {QUESTION["question"]: "High"}}
    assert decision.answers[0].tier == "override" and decision.answers[0].source == "agent"
    assert answerer.requests == []
    assert decision.hook_output() == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"questions": [QUESTION], "answers": {QUESTION["question"]: "High"}},
        }
    }


def test_tier_1_records_human_provenance():
    per_entry = handlers(ASK, case_overrides={QUESTION["question"]: {"answer": "High", "source": "human"}})
    assert decide(ask(QUESTION), per_entry, CASE, {}, None).answers[0].source == "human"
    file_level = handlers(ASK, case_overrides={QUESTION["question"]: "High"}, case_overrides_source="human")
    assert decide(ask(QUESTION), file_level, CASE, {}, None).answers[0].source == "human"


def test_tier_1_is_exact_text_only():
    answerer = FakeAnswerer("Normal")
    overrides = handlers(ASK, case_overrides={"what priority should this have?": "High"})
    decision = decide(ask(QUESTION), overrides, CASE, {}, answerer)
    assert decision.answers[0].tier == "llm" and decision.answers[0].answer == "Normal"


def test_tier_2_the_hook_model_gets_question_options_prompt_and_case_context():
    answerer = FakeAnswerer("Normal")
    decision = decide(ask(QUESTION), handlers(ASK, hook_model="claude-haiku-4-5"), CASE, {}, answerer)
    answer = decision.answers[0]
    assert (answer.answer, answer.tier, answer.match, answer.model) == ("Normal", "llm", "exact", "claude-haiku-4-5")
    (request,) = answerer.requests
    assert request.question == QUESTION["question"]
    assert [(o.label, o.description) for o in request.options] == [("High", "urgent"), ("Normal", "default")]
    assert request.handler_prompt == "Prefer Normal."
    assert request.model == "claude-haiku-4-5"
    assert "--- input.yaml ---\ntitle: x" in request.case_context
    assert "--- answers.yaml ---\npriority: Normal" in request.case_context


@pytest.mark.parametrize("reply", ["normal", " NORMAL ", '"Normal"', "'normal'"])
def test_tier_2_replies_resolve_case_insensitively(reply):
    decision = decide(ask(QUESTION), handlers(ASK), CASE, {}, FakeAnswerer(reply))
    assert (decision.answers[0].answer, decision.answers[0].match) == ("Normal", "fuzzy")


def test_tier_3_a_reply_naming_no_option_falls_back_to_the_first_option():
    decision = decide(ask(QUESTION), handlers(ASK), CASE, {}, FakeAnswerer("Medium, I think"))
    answer = decision.answers[0]
    assert (answer.answer, answer.tier, answer.llm_raw) == ("High", "fallback", "Medium, I think")
    assert decision.warnings == (
        "AskUserQuestion fallback: no case override and no LLM answer for "
        "'What priority should this have?' — defaulting to 'High'",
    )


def test_tier_3_a_failing_model_falls_back_and_records_the_error():
    decision = decide(ask(QUESTION), handlers(ASK), CASE, {}, FakeAnswerer(ConnectionError("down")))
    assert decision.answers[0].tier == "fallback"
    assert decision.answers[0].error == "ConnectionError: down"


def test_tier_3_without_options_is_yes_and_the_model_is_not_asked():
    answerer = FakeAnswerer()
    decision = decide(ask({"question": "Proceed?"}), handlers(ASK), CASE, {}, answerer)
    assert decision.updated_input == {"questions": [{"question": "Proceed?"}], "answers": {"Proceed?": "yes"}}
    assert answerer.requests == []


def test_without_an_answerer_tier_2_is_skipped():
    decision = decide(ask(QUESTION), handlers(ASK), CASE, {}, None)
    assert decision.answers[0].tier == "fallback" and decision.answers[0].error is None


def test_every_question_is_answered_in_one_call():
    second = {"question": "Ship it?", "options": [{"label": "Yes"}, {"label": "No"}]}
    decision = decide(
        ask(QUESTION, second),
        handlers(ASK, case_overrides={"Ship it?": "No"}),
        CASE,
        {},
        FakeAnswerer("High"),
    )
    assert decision.updated_input["answers"] == {QUESTION["question"]: "High", "Ship it?": "No"}
    assert [a.tier for a in decision.answers] == ["llm", "override"]


def test_a_catch_all_handler_answers_questions_too():
    decision = decide(ask(QUESTION), handlers({"match": "anything", "patterns": ["*"]}), CASE, {}, None)
    assert decision.kind == "allow" and decision.updated_input is not None


def test_a_question_input_without_questions_is_denied():
    decision = decide(event("AskUserQuestion", {"questions": "what?"}), handlers(ASK), CASE, {}, None)
    assert decision.kind == "deny" and "no list of questions" in decision.reason


def test_more_questions_than_the_tool_allows_are_denied_without_asking():
    answerer = FakeAnswerer()
    decision = decide(ask(*[QUESTION] * 9), handlers(ASK), CASE, {}, answerer)
    assert decision.kind == "deny" and "9 questions; at most 8" in decision.reason and answerer.requests == []
    assert decide(ask(*[QUESTION] * 8), handlers(ASK), CASE, {}, None).kind == "allow"


def test_questions_larger_than_a_real_call_are_denied():
    huge = {**QUESTION, "question": "Q" * 600_000}
    decision = decide(ask(huge), handlers(ASK), CASE, {}, FakeAnswerer())
    assert decision.kind == "deny" and "characters of questions" in decision.reason


@pytest.mark.parametrize(
    ("question", "why"),
    [
        ({**QUESTION, "question": "?" * 4097}, "4097 characters"),
        ({**QUESTION, "options": [{"label": f"L{n}"} for n in range(9)]}, "9 options"),
        ({**QUESTION, "options": [{"label": "L" * 1025}, {"label": "M"}]}, "label or description"),
        ({**QUESTION, "options": [{"label": "A", "description": "d" * 4097}, {"label": "B"}]}, "label or description"),
    ],
)
def test_an_oversized_question_is_answered_without_the_hook_model(question, why):
    answerer = FakeAnswerer("Normal")
    decision = decide(ask(question), handlers(ASK), CASE, {}, answerer)
    (answer,) = decision.answers
    assert decision.kind == "allow" and answerer.requests == []
    assert answer.tier == "fallback" and answer.error.startswith("not asked:") and why in answer.error


def test_a_fallback_warning_quotes_a_long_question_shortly():
    question = {**QUESTION, "question": "W" * 3000}
    decision = decide(ask(question), handlers(ASK), CASE, {}, None)
    (warning,) = decision.warnings
    assert len(warning) < 400 and "[3000 chars]" in warning


# --- Bash ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "server", "kind"),
    [
        ("jira issue create --summary x", "http://localhost:8080", "allow"),
        ("JIRA issue list", "https://jira-emulator.internal", "allow"),  # filters are case-insensitive
        ('curl "$JIRA_SERVER/rest/api/2/issue"', "https://Test.Example", "allow"),  # the value is lowercased
        ("jira issue create", "https://jira.example.com", "deny"),
        ("jira issue create", "", "deny"),
        ("ls -la", "https://jira.example.com", "pass"),  # Bash in patterns, but no filter matches
    ],
)
def test_bash_is_gated_by_input_filters_then_env_checks(command, server, kind):
    env = {"JIRA_SERVER": server} if server else {}
    decision = decide(event("Bash", {"command": command}), handlers(JIRA), CASE, env, None)
    assert decision.kind == kind
    if kind == "deny":
        assert decision.reason == f"Env JIRA_SERVER='{server}' doesn't match required: ['localhost', 'emulator', 'test']"
        assert decision.hook_output()["hookSpecificOutput"]["permissionDecisionReason"] == decision.reason
    else:
        # An allowed (env checks passed) or unmatched call prints nothing: the CLI's permissions decide.
        assert decision.hook_output() is None
    if kind != "pass":
        assert (decision.handler_index, decision.handler_match) == (0, "Any Jira interaction")


def test_a_bash_handler_needs_bash_in_patterns():
    no_bash = {**JIRA, "patterns": ["mcp__atlassian__*"]}
    assert decide(event("Bash", {"command": "jira x"}), handlers(no_bash), CASE, {}, None).kind == "pass"


def test_a_bash_handler_without_input_filters_is_skipped_with_a_warning():
    misconfigured = {"match": "Jira scripts", "patterns": ["Bash"], "prompt": "deny"}
    decision = decide(event("Bash", {"command": "jira issue create"}), handlers(misconfigured), CASE, {}, None)
    assert decision.kind == "pass"
    assert len(decision.warnings) == 1
    assert "handler 'Jira scripts' has 'Bash' in patterns but no input_filters — skipping it" in decision.warnings[0]


def test_the_bash_rule_does_not_fall_through_to_a_later_pattern_of_the_same_handler():
    handler = {"match": "m", "patterns": ["Bash", "*"], "input_filters": ["jira"]}
    assert decide(event("Bash", {"command": "ls"}), handlers(handler), CASE, {}, None).kind == "pass"


def test_the_first_matching_handler_wins():
    deny_all_mcp = {"match": "block MCP", "patterns": ["mcp__*"]}
    decision = decide(event("mcp__atlassian__create_issue"), handlers(deny_all_mcp, JIRA), CASE, {"JIRA_SERVER": "test"}, None)
    assert (decision.kind, decision.handler_index) == ("deny", 0)
    decision = decide(event("mcp__atlassian__create_issue"), handlers(JIRA, deny_all_mcp), CASE, {"JIRA_SERVER": "test"}, None)
    assert (decision.kind, decision.handler_index) == ("allow", 0)


# --- MCP and other tools ------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "kind"),
    [
        ("mcp__atlassian__create_issue", "deny"),
        ("mcp__atlassian__", "deny"),
        ("mcp__atlassian_other__x", "pass"),  # the glob is a prefix: `mcp__atlassian__`
        ("mcp__slack__post", "pass"),
        ("Read", "pass"),
    ],
)
def test_mcp_tools_match_by_glob_and_deny_without_env_checks(tool, kind):
    block = {"match": "Block the Jira MCP server", "patterns": ["mcp__atlassian__*"]}
    decision = decide(event(tool), handlers(block), CASE, {}, None)
    assert decision.kind == kind
    if kind == "deny":
        assert decision.reason == "Blocked by eval harness: Block the Jira MCP server"


def test_an_exact_pattern_matches_only_that_tool():
    block = {"match": "no writes", "patterns": ["Write"]}
    assert decide(event("Write"), handlers(block), CASE, {}, None).kind == "deny"
    assert decide(event("WriteFile"), handlers(block), CASE, {}, None).kind == "pass"


def test_all_env_checks_must_pass():
    both = {**JIRA, "env_checks": {"JIRA_SERVER": {"must_contain": ["test"]}, "JIRA_USER": {"must_contain": ["bot"]}}}
    ok = {"JIRA_SERVER": "test", "JIRA_USER": "ci-bot"}
    assert decide(event("mcp__atlassian__x"), handlers(both), CASE, ok, None).kind == "allow"
    decision = decide(event("mcp__atlassian__x"), handlers(both), CASE, {**ok, "JIRA_USER": "alice"}, None)
    assert decision.kind == "deny" and "JIRA_USER='alice'" in decision.reason


def test_an_empty_must_contain_passes():
    handler = {**JIRA, "env_checks": {"JIRA_SERVER": {"must_contain": []}}}
    assert decide(event("mcp__atlassian__x"), handlers(handler), CASE, {}, None).kind == "allow"


def test_must_contain_is_compared_with_the_lowercased_value_as_written():
    # As in the reference: only the value is lowercased, so an upper-case substring never matches.
    handler = {**JIRA, "env_checks": {"JIRA_SERVER": {"must_contain": ["TEST"]}}}
    assert decide(event("mcp__atlassian__x"), handlers(handler), CASE, {"JIRA_SERVER": "TEST"}, None).kind == "deny"


def test_no_handler_passes_through():
    decision = decide(event("Read", {"file_path": "x"}), handlers(JIRA, ASK), CASE, {}, None)
    assert (decision.kind, decision.hook_output(), decision.handler_index) == ("pass", None, None)


def test_no_handlers_at_all_pass_through():
    assert decide(event("Bash", {"command": "rm -rf /"}), handlers(), CASE, {}, None).kind == "pass"


# --- inputs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ([], "not a JSON object"),
        ({}, "no tool_name"),
        ({"tool_name": ""}, "no tool_name"),
        ({"tool_name": "Bash", "tool_input": "ls"}, "tool_input is not a JSON object"),
    ],
)
def test_malformed_events_are_refused(payload, problem):
    with pytest.raises(MalformedEvent, match=problem):
        ToolEvent.from_payload(payload)


def test_an_event_reads_the_fields_claude_code_sends():
    parsed = ToolEvent.from_payload(
        {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
         "tool_input": {"command": "ls"}, "tool_use_id": "toolu_9", "cwd": "/workspace"}
    )
    assert parsed == ToolEvent("Bash", {"command": "ls"}, "toolu_9", "s")


def test_case_context_reads_input_and_answers(tmp_path):
    (tmp_path / "input.yaml").write_text("a: 1\n")
    (tmp_path / "answers.yml").write_text("b: 2\n")
    (tmp_path / "annotations.yaml").write_text("secret: judges only\n")
    context = CaseContext.from_case_dir(tmp_path)
    assert context.files == (("input.yaml", "a: 1\n"), ("answers.yaml", "b: 2\n"))
    assert context.render() == "\n--- input.yaml ---\na: 1\n\n\n--- answers.yaml ---\nb: 2\n\n"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("High", ("High", "exact")), ("high", ("High", "fuzzy")), ("  High\n", ("High", "exact")), ("Hi", None)],
)
def test_resolve_label(reply, expected):
    assert resolve_label(reply, ["High", "Normal"]) == expected
