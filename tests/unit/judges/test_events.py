"""What judges derive from the flat event list."""

from __future__ import annotations

from agent_eval_sandbox.judges.events import (
    captured_tool_calls,
    conversation_text,
    evidence_text,
    read_paths,
    tool_trace,
)
from tests.unit.judges.rundir_fixture import assistant, result_event, tool, tool_result

EVENTS = [
    assistant("Looking at the docs.", [tool("Read", "t1", file_path="/ws/docs/setup.md")], thinking="plan: read docs"),
    tool_result("t1", "setup text"),
    assistant("", [tool("Agent", "t2", description="explore")]),
    assistant("sub text", [tool("Grep", "t3", pattern="auth", path="/ws/src/auth.py")], parent="t2"),
    tool_result("t3", "match"),
    assistant("Writing.", [tool("Write", "t4", file_path="/ws/out/report.md", content="x"),
                           tool("Bash", "t5", command="pytest -q")]),
    tool_result("t5", "Error: 1 failed", is_error=True),
    result_event(cost=0.25, turns=4),
]


def test_conversation_is_root_visible_text_only() -> None:
    assert conversation_text(EVENTS) == "Looking at the docs.\n\nWriting."


def test_reasoning_adds_thinking_before_each_turn() -> None:
    assert conversation_text(EVENTS, include_thinking=True) == "[thinking]\nplan: read docs\n\nLooking at the docs.\n\nWriting."


def test_captured_tool_calls_join_results_and_skip_subagents() -> None:
    calls = captured_tool_calls(EVENTS, None)
    assert [c["name"] for c in calls] == ["Read", "Agent", "Write", "Bash"]
    bash = calls[-1]
    assert bash == {"name": "Bash", "input": {"command": "pytest -q"}, "id": "t5", "result": "Error: 1 failed", "is_error": True}
    assert calls[1]["result"] is None and calls[1]["is_error"] is False


def test_captured_tool_calls_match_patterns_by_substring() -> None:
    assert [c["name"] for c in captured_tool_calls(EVENTS, ["Writ", "Read"])] == ["Read", "Write"]
    assert captured_tool_calls(EVENTS, ["mcp__jira"]) == []


def test_tool_trace_numbers_calls_and_marks_subagents() -> None:
    assert tool_trace(EVENTS).splitlines() == [
        "1. Read: /ws/docs/setup.md",
        "2. Agent: explore",
        "  [subagent] 3. Grep: auth in /ws/src/auth.py",
        "4. Write: /ws/out/report.md",
        "5. Bash: pytest -q",
    ]


def test_read_paths_options() -> None:
    assert read_paths(EVENTS) == ["/ws/docs/setup.md", "/ws/src/auth.py"]
    assert read_paths(EVENTS, include_subagents=False) == ["/ws/docs/setup.md"]
    assert read_paths(EVENTS, include_grep=False) == ["/ws/docs/setup.md"]


def test_evidence_summarises_activity() -> None:
    text = evidence_text(EVENTS)
    assert "Total turns: 4" in text and "Cost: $0.25" in text
    assert "Files read: setup.md" in text and "Files written: report.md" in text
    assert "Commands run: pytest -q" in text


def test_hostile_events_are_tolerated() -> None:
    junk = [None, 3, "x", {"type": "assistant", "text": 5, "tools": "nope"}, {"type": "assistant", "tools": [None, {"name": 7}]}]
    assert conversation_text(junk) == ""
    assert captured_tool_calls(junk, None) == []
    assert tool_trace(junk) == ""
    assert "Tool calls: none" in evidence_text(junk)
    assert conversation_text("not a list") == ""
