import itertools
import re

from agent_eval_sandbox.gateway.replies import (
    estimate_tokens,
    exhausted_step,
    new_id,
    reply_message,
)
from agent_eval_sandbox.gateway.script import Step
from agent_eval_sandbox.gateway.usage import Usage

REQUEST = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}


def counting_ids():
    counter = itertools.count()
    return lambda prefix: f"{prefix}{next(counter)}"


def test_tool_step_becomes_text_then_tool_use_blocks():
    step = Step(text="Running it.", tool_calls=[{"tool": "Bash", "input": {"command": "ls"}}, {"tool": "Read"}])
    message = reply_message(step, REQUEST, counting_ids())
    assert message["content"] == [
        {"type": "text", "text": "Running it."},
        {"type": "tool_use", "id": "toolu_0", "name": "Bash", "input": {"command": "ls"}},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}},
    ]
    assert message["stop_reason"] == "tool_use" and message["id"] == "msg_2"
    assert message["model"] == "claude-sonnet-4-5" and message["role"] == "assistant"


def test_empty_leading_text_is_left_out_of_a_tool_turn():
    message = reply_message(Step(text="", tool="Bash"), REQUEST)
    assert [b["type"] for b in message["content"]] == ["tool_use"]


def test_text_step_ends_the_turn_and_echoes_its_model():
    message = reply_message(Step(text="done", model="claude-opus-4-5"), REQUEST)
    assert message["stop_reason"] == "end_turn" and message["model"] == "claude-opus-4-5"


def test_explicit_usage_is_reported_verbatim():
    message = reply_message(Step(text="x", usage=Usage(input_tokens=1000, output_tokens=5)), REQUEST)
    assert message["usage"]["input_tokens"] == 1000 and message["usage"]["output_tokens"] == 5


def test_default_usage_is_estimated_from_sizes():
    message = reply_message(Step(text="x" * 400), REQUEST)
    assert message["usage"]["input_tokens"] == estimate_tokens(REQUEST)
    assert message["usage"]["output_tokens"] >= 100


def test_ids_are_well_formed_and_unique():
    ids = {new_id("toolu_") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"toolu_01[A-Za-z0-9]{22}", i) for i in ids)


def test_exhausted_step_is_a_final_text():
    step = exhausted_step(3, 2)
    assert step.calls == [] and "exhausted" in step.text and "3" in step.text


def test_reported_output_never_exceeds_the_requests_max_tokens():
    """As the API: a gateway that lowered max_tokens to fit a budget must not be billed past it."""
    step = Step(text="x", usage=Usage(input_tokens=1000, output_tokens=20000))
    message = reply_message(step, {**REQUEST, "max_tokens": 1500})
    assert message["usage"]["output_tokens"] == 1500 and message["usage"]["input_tokens"] == 1000
    assert reply_message(step, {**REQUEST, "max_tokens": 30000})["usage"]["output_tokens"] == 20000
    unbounded = {k: v for k, v in REQUEST.items() if k != "max_tokens"}
    assert reply_message(step, unbounded)["usage"]["output_tokens"] == 20000
