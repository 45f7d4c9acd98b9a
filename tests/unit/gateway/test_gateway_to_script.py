"""A cassette as a model_script.yaml: steps, advance, and that the script answers as the recording did."""

from __future__ import annotations

import json
from typing import Any

import httpx
import yaml

from agent_eval_sandbox.gateway.cassette import Cassette, End, Entry, Header, Response
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import Advance, parse_script
from agent_eval_sandbox.gateway.to_script import cassette_to_script, choose_advance, convert_entry
from tests.standin_upstream import sse_bytes

PATH = "/v1/messages?beta=true"


def _message(content: list[dict[str, Any]], stop: str = "end_turn", **usage: int) -> dict[str, Any]:
    return {"id": "msg_01x", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20, **usage}}


def _stream(message: dict[str, Any]) -> str:
    """The message as SSE events, tool input and text cut into pieces."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}})]
    for index, block in enumerate(message["content"]):
        opening = {**block, "input": {}} if block["type"] == "tool_use" else {**block, "text": ""}
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        if block["type"] == "tool_use":
            raw = json.dumps(block["input"])
            for start in range(0, len(raw), 7):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": raw[start:start + 7]}}))
        elif block["type"] == "text":
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "text_delta", "text": block["text"]}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]},
                                     "usage": {"output_tokens": message["usage"]["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return sse_bytes(events).decode()


def _request(turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for turn in range(turns):
        messages += [{"role": "assistant", "content": [{"type": "text", "text": f"t{turn}"}]},
                     {"role": "user", "content": "more"}]
    return {"model": "claude-sonnet-4-6", "max_tokens": 1000, "stream": True, "messages": messages}


def _entry(seq: int, turns: int, message: dict[str, Any] | None = None, *, status: int = 200, body: str = "",
           path: str = PATH) -> Entry:
    content_type = "text/event-stream" if message is not None else "application/json"
    return Entry(seq=seq, method="POST", path=path, request=_request(turns),
                 response=Response(status=status, headers=[("content-type", content_type)],
                                   body=_stream(message) if message is not None else body))


TOOL = {"type": "tool_use", "id": "toolu_01a", "name": "Bash", "input": {"command": "echo 'é' > out/x.txt"}}
READ = {"type": "tool_use", "id": "toolu_01b", "name": "Read", "input": {"file_path": "/workspace/out/x.txt"}}


def test_a_turn_becomes_a_step_with_its_text_tool_calls_and_usage():
    step = convert_entry(_entry(0, 0, _message([{"type": "text", "text": "Let me."}, TOOL], "tool_use",
                                               cache_read_input_tokens=7)))
    assert step is not None and not step.is_error and step.assistant_turns == 0
    assert step.step == {"text": "Let me.", "tool": "Bash", "input": {"command": "echo 'é' > out/x.txt"},
                         "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 7}}
    both = convert_entry(_entry(1, 1, _message([TOOL, READ], "tool_use")))
    assert both is not None and both.step["tool_calls"] == [
        {"tool": "Bash", "input": TOOL["input"]}, {"tool": "Read", "input": READ["input"]}]
    assert "text" not in both.step


def test_errors_become_error_steps_and_what_a_script_cannot_hold_is_noted():
    overloaded = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    step = convert_entry(_entry(0, 0, status=529, body=overloaded))
    assert step is not None and step.is_error
    assert step.step == {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}
    thinking = convert_entry(_entry(0, 0, _message([{"type": "thinking", "thinking": "hm", "signature": "s"},
                                                    {"type": "text", "text": "out of room"}], "max_tokens")))
    assert thinking is not None and thinking.step["text"] == "out of room"
    assert "left out: thinking block(s)" in thinking.comment and "'max_tokens'" in thinking.comment


def test_token_counts_and_unanswered_requests_make_no_step():
    count = _entry(0, 0, body='{"input_tokens": 5}', path="/v1/messages/count_tokens")
    unanswered = Entry(seq=1, method="POST", path=PATH, request=_request(0), outcome="client_disconnected")
    assert convert_entry(count) is None and convert_entry(unanswered) is None


def _cassette(*entries: Entry) -> Cassette:
    return Cassette(Header(cassette=1, case_id="c1", created_at="2026-12-01T00:00:00+00:00"), tuple(entries),
                    End(entries=len(entries)), "cases/c1/cassette.jsonl")


def test_one_conversation_gets_per_turn_and_anything_else_per_request():
    linear = [convert_entry(_entry(i, i, _message([{"type": "text", "text": str(i)}]))) for i in range(3)]
    assert choose_advance([s for s in linear if s]) is Advance.PER_TURN
    retried = [*linear[:1], convert_entry(_entry(1, 1, status=529, body="{}")), *linear[1:]]
    assert choose_advance([s for s in retried if s]) is Advance.PER_REQUEST
    subagent = [*linear[:2], convert_entry(_entry(2, 0, _message([{"type": "text", "text": "sub"}]))), linear[2]]
    assert choose_advance([s for s in subagent if s]) is Advance.PER_REQUEST


def test_the_script_loads_and_the_scripted_server_answers_as_the_recording_did():
    messages = [_message([{"type": "text", "text": "Starting: naïve 日本"}, TOOL], "tool_use"),
                _message([TOOL, READ], "tool_use", output_tokens=33),
                _message([{"type": "text", "text": "Finished.\nTwo lines: 'quoted' # not a comment"}])]
    overloaded = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    entries = [_entry(0, 0, messages[0]), _entry(1, 1, status=529, body=overloaded), _entry(2, 1, messages[1]),
               _entry(3, 2, messages[2])]
    text = cassette_to_script(_cassette(*entries))
    assert text.startswith("# Made by `agent-eval-sandbox cassette to-script` from cases/c1/cassette.jsonl")
    assert "\nadvance: per_request\n" in text
    assert "# seq 1: 1 assistant turn(s) in the request; answered with an error" in text
    script = parse_script(yaml.safe_load(text), source="made.yaml")
    assert script.advance is Advance.PER_REQUEST and len(script.steps) == 4
    with ScriptedModelServer(script) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        answers = [client.post("/v1/messages", json={**e.request, "stream": False}) for e in entries]
    assert [a.status_code for a in answers] == [200, 529, 200, 200]
    for answer, message in zip((answers[0], answers[2], answers[3]), messages, strict=True):
        got = answer.json()
        assert [(b["type"], b.get("text"), b.get("name"), b.get("input")) for b in got["content"]] == [
            (b["type"], b.get("text"), b.get("name"), b.get("input")) for b in message["content"]]
        assert got["usage"]["output_tokens"] == message["usage"]["output_tokens"]
    # asked for per_turn, it says so
    assert "\nadvance: per_turn\n" in cassette_to_script(_cassette(*entries), Advance.PER_TURN)


def test_an_incomplete_or_empty_cassette_still_converts():
    empty = Cassette(Header(cassette=1), (), None)
    text = cassette_to_script(empty)
    assert "WARNING: the cassette is incomplete" in text
    assert parse_script(yaml.safe_load(text)).steps == []
