from __future__ import annotations

import json

from agent_eval_sandbox.judges.events import captured_tool_calls, conversation_text
from agent_eval_sandbox.runner.events import (
    background_tasks_killed,
    read_stream,
    stream_objects,
)

STREAM = [
    {"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5"},
    {"type": "assistant", "message": {"id": "m1", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
    ]}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.txt"}]},
    ]}},
    {"type": "assistant", "parent_tool_use_id": "t9", "message": {"id": "m2", "content": [{"type": "text", "text": "sub"}]}},
    {"type": "assistant", "message": {"id": "m3", "content": [
        {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Done."}]}},
    {"type": "result", "subtype": "success", "total_cost_usd": 0.12, "num_turns": 2, "session_id": "s-1",
     "result": "Done.", "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 1},
     "permission_denials": [{"tool_name": "Write", "tool_use_id": "t5", "tool_input": {}}]},
]


def lines(objs):
    return [json.dumps(o) for o in objs] + ["not json", ""]


def parse_stream_events(text_lines, cap=None):
    objects = (obj for _, obj in stream_objects(text_lines))
    return read_stream(objects, cap)[0] if cap else read_stream(objects)[0]


def summarize_stream(text_lines):
    return read_stream(obj for _, obj in stream_objects(text_lines))[1]


def test_flat_event_schema():
    events = parse_stream_events(lines(STREAM))
    assert [e["type"] for e in events] == ["system", "assistant", "tool_result", "assistant", "assistant", "result"]
    assert events[1]["tools"] == [{"name": "Bash", "id": "t1", "input": {"command": "ls"}}]
    assert events[2]["tool_name"] == "Bash" and events[2]["content"] == "a.txt" and events[2]["is_error"] is False
    assert events[3]["parent_tool_use_id"] == "t9"
    assert events[4]["thinking"] == "hmm"
    assert events[5] == {"type": "result", "cost_usd": 0.12, "num_turns": 2, "timestamp": None}


def test_tool_result_capped():
    big = {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "x", "content": "y" * 100}]}}
    event = parse_stream_events(lines([big]), cap=10)[0]
    assert event["content"] == "y" * 10 and event["truncated"] and event["original_length"] == 100


def test_tool_calls_join_results_and_conversation_skips_subagents():
    events = parse_stream_events(lines(STREAM))
    calls = captured_tool_calls(events, None)
    assert calls == [{"name": "Bash", "input": {"command": "ls"}, "id": "t1", "result": "a.txt", "is_error": False}]
    assert conversation_text(events) == "Let me look.\n\nDone."


def test_summary():
    summary = summarize_stream(lines(STREAM))
    assert summary.session_id == "s-1" and summary.model == "claude-sonnet-4-5"
    assert summary.cost_usd == 0.12 and summary.num_turns == 2
    assert summary.token_usage == {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 1}
    assert summary.permission_denials == [{"tool_name": "Write", "tool_use_id": "t5", "tool_input": {}}]
    assert summary.result_text == "Done." and summary.unknown_command is None


def test_denials_from_every_result_segment_deduplicated():
    first = {"type": "result", "permission_denials": [{"tool_use_id": "a"}, {"tool_use_id": "b"}]}
    second = {"type": "result", "permission_denials": [{"tool_use_id": "b"}, {"tool_use_id": "c"}]}
    summary = summarize_stream(lines([first, second]))
    assert [d["tool_use_id"] for d in summary.permission_denials] == ["a", "b", "c"]


def test_unknown_command_detected_only_without_turns():
    unknown = {"type": "result", "num_turns": 0, "result": "Unknown command: /nope"}
    assert summarize_stream(lines([unknown])).unknown_command == "/nope"
    quoted = {"type": "result", "num_turns": 3, "result": "Unknown command: /nope was discussed"}
    assert summarize_stream(lines([quoted])).unknown_command is None


def test_background_kill_detection():
    assert background_tasks_killed("x\nBackground tasks still running after 600s; terminating\n")
    assert not background_tasks_killed("all good")
