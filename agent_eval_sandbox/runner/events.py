"""The CLI's stream-json output, parsed (pure).

`parse_stream_events` produces the flat event list of agent-eval-harness
(`events.json`, `outputs["events"]`): `assistant` events with `text`, `tools`
and optional `thinking`; `tool_result` events; `result` and `system` events.
`summarize_stream` pulls what run_result.json needs from the same lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

RESULT_CAP = 50_000
_UNKNOWN_COMMAND = re.compile(r"^Unknown command:\s*(/\S+)")
_BG_KILL = re.compile(r"Background tasks still running after .*terminating", re.S)


def _json_lines(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def _cap(text: str, cap: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= cap else (text[:cap], True)


def _cap_input(value: Any, cap: int) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: (_cap(v, cap)[0] if isinstance(v, str) else v) for k, v in value.items()}


def _assistant_event(obj: dict[str, Any], cap: int) -> dict[str, Any]:
    message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
    texts: list[str] = []
    thinking: list[str] = []
    tools: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking.append(block["thinking"])
        elif kind == "redacted_thinking":
            thinking.append("[redacted thinking]")
        elif kind == "tool_use":
            tools.append(
                {
                    "name": str(block.get("name", "")),
                    "id": str(block.get("id", "")),
                    "input": _cap_input(block.get("input", {}), cap),
                }
            )
    event: dict[str, Any] = {"type": "assistant", "text": "".join(texts), "tools": tools,
                             "timestamp": obj.get("timestamp")}
    if thinking:
        event["thinking"] = "\n".join(thinking)
    if message.get("id"):
        event["_msg_id"] = message["id"]
    if obj.get("parent_tool_use_id"):
        event["parent_tool_use_id"] = obj["parent_tool_use_id"]
    return event


def _tool_results(obj: dict[str, Any], names: dict[str, str], cap: int) -> list[dict[str, Any]]:
    message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
    content = message.get("content")
    if not isinstance(content, list):
        return []
    events = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        raw = block.get("content", "")
        if isinstance(raw, list):
            raw = "".join(
                part.get("text", "") if isinstance(part, dict) else str(part)
                for part in raw
                if isinstance(part, (dict, str))
            )
        elif not isinstance(raw, str):
            raw = str(raw)
        text, truncated = _cap(raw, cap)
        tool_use_id = str(block.get("tool_use_id", ""))
        event: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "tool_name": names.get(tool_use_id, ""),
            "content": text,
            "is_error": bool(block.get("is_error", False)),
            "timestamp": obj.get("timestamp"),
        }
        if truncated:
            event["truncated"] = True
            event["original_length"] = len(raw)
        if obj.get("parent_tool_use_id"):
            event["parent_tool_use_id"] = obj["parent_tool_use_id"]
        events.append(event)
    return events


def parse_stream_events(lines: Iterable[str], cap: int = RESULT_CAP) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for obj in _json_lines(lines):
        kind = obj.get("type")
        if kind == "assistant":
            event = _assistant_event(obj, cap)
            for tool in event["tools"]:
                names[tool["id"]] = tool["name"]
            events.append(event)
        elif kind == "user":
            events.extend(_tool_results(obj, names, cap))
        elif kind == "result":
            events.append({"type": "result", "cost_usd": obj.get("total_cost_usd"),
                           "num_turns": obj.get("num_turns"), "timestamp": None})
        elif kind == "system":
            event = {"type": "system", "subtype": obj.get("subtype", ""), "timestamp": obj.get("timestamp")}
            if obj.get("subtype") == "init":
                event["model"] = obj.get("model", "")
            events.append(event)
    return events


def tool_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool call with its result joined in: `{name, input, id, result, is_error}`."""
    results = {e["tool_use_id"]: e for e in events if e.get("type") == "tool_result"}
    calls = []
    for event in events:
        if event.get("type") != "assistant":
            continue
        for tool in event.get("tools", []):
            result = results.get(tool["id"], {})
            calls.append(
                {
                    "name": tool["name"],
                    "input": tool["input"],
                    "id": tool["id"],
                    "result": result.get("content"),
                    "is_error": result.get("is_error", False),
                }
            )
    return calls


def conversation_text(events: list[dict[str, Any]]) -> str:
    """Root-level visible assistant text (no subagents, tools or thinking)."""
    return "\n\n".join(
        e["text"] for e in events if e.get("type") == "assistant" and e.get("text") and not e.get("parent_tool_use_id")
    )


@dataclass
class StreamSummary:
    """What run_result.json needs from the CLI's output."""

    result: dict[str, Any] | None = None
    session_id: str | None = None
    model: str | None = None
    cost_usd: float | None = None
    num_turns: int | None = None
    token_usage: dict[str, int] = field(default_factory=dict)
    permission_denials: list[dict[str, Any]] = field(default_factory=list)
    unknown_command: str | None = None

    @property
    def result_text(self) -> str | None:
        text = (self.result or {}).get("result")
        return text if isinstance(text, str) else None

    @property
    def is_error(self) -> bool:
        return bool((self.result or {}).get("is_error"))

    @property
    def budget_exhausted(self) -> bool:
        """The CLI's own --max-budget-usd stopped the session."""
        result = self.result or {}
        return result.get("subtype") == "error_max_budget_usd" or result.get("terminal_reason") == "budget_exhausted"


_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def summarize_stream(lines: Iterable[str]) -> StreamSummary:
    summary = StreamSummary()
    denials: list[dict[str, Any]] = []
    for obj in _json_lines(lines):
        kind = obj.get("type")
        if kind == "system" and obj.get("subtype") == "init":
            summary.session_id = obj.get("session_id") or summary.session_id
            summary.model = obj.get("model") or summary.model
        elif kind == "result":
            summary.result = obj
            summary.session_id = obj.get("session_id") or summary.session_id
            if isinstance(obj.get("total_cost_usd"), (int, float)):
                summary.cost_usd = float(obj["total_cost_usd"])
            if isinstance(obj.get("num_turns"), int):
                summary.num_turns = obj["num_turns"]
            usage = obj.get("usage")
            if isinstance(usage, dict):
                summary.token_usage = {k: int(usage[k]) for k in _USAGE_KEYS if isinstance(usage.get(k), int)}
            # A resumed session emits one result event per segment, each with
            # only its own denials: keep them all.
            if isinstance(obj.get("permission_denials"), list):
                denials.extend(d for d in obj["permission_denials"] if isinstance(d, dict))
    seen: set[str] = set()
    for denial in denials:
        key = denial.get("tool_use_id")
        if key and key in seen:
            continue
        if key:
            seen.add(key)
        summary.permission_denials.append(denial)
    if summary.result is not None:
        turns = summary.result.get("num_turns")
        text = summary.result_text
        if text and not (isinstance(turns, (int, float)) and turns > 0):
            match = _UNKNOWN_COMMAND.match(text.strip())
            summary.unknown_command = match.group(1) if match else None
    return summary


def background_tasks_killed(stderr_text: str) -> bool:
    return bool(_BG_KILL.search(stderr_text))
