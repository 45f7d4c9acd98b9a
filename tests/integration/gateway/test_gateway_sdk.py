"""(d) The `anthropic` SDK against the scripted server: how offline LLM judges work."""

from __future__ import annotations

import anthropic
import pytest

from agent_eval_sandbox.gateway import ScriptedModelServer, parse_script

VERDICT_TOOL = {
    "name": "verdict",
    "description": "Record the verdict.",
    "input_schema": {
        "type": "object",
        "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}},
        "required": ["score"],
    },
}
ASK = [{"role": "user", "content": "Grade this."}]


def client_for(server: ScriptedModelServer, **kwargs) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="placeholder", **kwargs)


def test_non_streaming_text():
    script = parse_script([{"text": "Fine work.", "usage": {"input_tokens": 12, "output_tokens": 3}}])
    with ScriptedModelServer(script) as server:
        message = client_for(server).messages.create(model="claude-haiku-4-5", max_tokens=100, messages=ASK)
    assert message.content[0].type == "text" and message.content[0].text == "Fine work."
    assert message.stop_reason == "end_turn" and message.model == "claude-haiku-4-5"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 3)
    assert message.id.startswith("msg_")


def test_streaming_text_and_tool_use():
    script = parse_script(
        [
            {
                "text": "Checking " * 20,
                "tool": "Bash",
                "input": {"command": "ls -la", "timeout": 5},
                "usage": {"input_tokens": 7, "output_tokens": 9},
            }
        ]
    )
    with (
        ScriptedModelServer(script) as server,
        client_for(server).messages.stream(model="claude-sonnet-4-6", max_tokens=100, messages=ASK) as stream,
    ):
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert text == "Checking " * 20
    tool = message.content[1]
    assert tool.type == "tool_use" and tool.name == "Bash" and tool.input == {"command": "ls -la", "timeout": 5}
    assert tool.id.startswith("toolu_")
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 9)


def test_forced_tool_choice_returns_the_scripted_verdict():
    script = parse_script([{"tool": "verdict", "input": {"score": 4, "reason": "solid"}}])
    with ScriptedModelServer(script) as server:
        message = client_for(server).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=200,
            messages=ASK,
            tools=[VERDICT_TOOL],
            tool_choice={"type": "tool", "name": "verdict"},
        )
    assert message.content[0].input == {"score": 4, "reason": "solid"}


def test_a_script_that_contradicts_the_forced_tool_is_a_clear_400(tmp_path):
    path = tmp_path / "judge.yaml"
    path.write_text("- tool: grade\n  input: {score: 1}\n")
    with ScriptedModelServer(path) as server, pytest.raises(anthropic.BadRequestError) as caught:
        client_for(server).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=200,
            messages=ASK,
            tools=[VERDICT_TOOL],
            tool_choice={"type": "tool", "name": "verdict"},
        )
    message = caught.value.body["error"]["message"]
    assert str(path) in message and "step 0" in message
    assert "name: verdict" in message and "calls grade" in message


def test_per_request_advance_gives_successive_samples():
    script = parse_script({"advance": "per_request", "steps": [{"text": "one"}, {"text": "two"}, {"text": "three"}]})
    with ScriptedModelServer(script) as server:
        client = client_for(server)
        texts = [client.messages.create(model="m", max_tokens=5, messages=ASK).content[0].text for _ in range(4)]
    assert texts[:3] == ["one", "two", "three"]
    assert "exhausted" in texts[3]


def test_an_error_step_is_retried_by_the_sdk_then_the_next_step_answers():
    script = parse_script({"advance": "per_request", "steps": [{"error": {"status": 529}}, {"text": "recovered"}]})
    with ScriptedModelServer(script) as server:
        message = client_for(server, max_retries=1).messages.create(model="m", max_tokens=5, messages=ASK)
    assert message.content[0].text == "recovered"
    assert [r.status for r in server.requests] == [529, 200]


def test_an_error_step_surfaces_as_the_api_error():
    script = parse_script([{"error": {"type": "rate_limit_error", "message": "scripted slow down"}}])
    with ScriptedModelServer(script) as server, pytest.raises(anthropic.RateLimitError, match="scripted slow down"):
        client_for(server, max_retries=0).messages.create(model="m", max_tokens=5, messages=ASK)


def test_count_tokens_and_unknown_paths():
    script = parse_script([{"text": "x"}])
    with ScriptedModelServer(script) as server:
        client = client_for(server, max_retries=0)
        assert client.messages.count_tokens(model="m", messages=ASK).input_tokens > 0
        with pytest.raises(anthropic.NotFoundError):
            client.models.list()
