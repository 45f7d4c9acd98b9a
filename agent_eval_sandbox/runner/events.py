"""The CLI's stream-json output, parsed (pure).

`stream_objects` reads the JSON objects of the CLI's output line by line;
`StreamReader` turns them, in one pass, into the flat event list of
agent-eval-harness (`events.json`, `outputs["events"]`): `assistant` events
with `text`, `tools` and optional `thinking`; `tool_result` events; `result`
and `system` events, and into what run_result.json needs (`StreamSummary`).
Every string is capped, so what the host holds stays bounded whatever the
agent printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

RESULT_CAP = 50_000
# Assistant text and thinking: longer than any real answer, short of what a flood would hold.
TEXT_CAP = 200_000
_UNKNOWN_COMMAND = re.compile(r"^Unknown command:\s*(/\S+)")
_BG_KILL = re.compile(r"Background tasks still running after .*terminating", re.S)


def stream_objects(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for each line that is a JSON object."""
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield number, obj


def _cap(text: str, cap: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= cap else (text[:cap], True)


def _cap_input(value: Any, cap: int) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: (_cap(v, cap)[0] if isinstance(v, str) else v) for k, v in value.items()}


def _message(obj: dict[str, Any]) -> dict[str, Any]:
    message = obj.get("message")
    return message if isinstance(message, dict) else {}


def _assistant_event(obj: dict[str, Any], cap: int) -> dict[str, Any]:
    message = _message(obj)
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
    event: dict[str, Any] = {"type": "assistant", "text": _cap("".join(texts), TEXT_CAP)[0], "tools": tools,
                             "timestamp": obj.get("timestamp")}
    if thinking:
        event["thinking"] = _cap("\n".join(thinking), TEXT_CAP)[0]
    if obj.get("_unverified"):
        event["unverified"] = True
    if message.get("id"):
        event["_msg_id"] = message["id"]
    if obj.get("parent_tool_use_id"):
        event["parent_tool_use_id"] = obj["parent_tool_use_id"]
    return event


def _tool_results(obj: dict[str, Any], names: dict[str, str], cap: int) -> list[dict[str, Any]]:
    message = _message(obj)
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
        if block.get("_unverified"):
            event["unverified"] = True
        if obj.get("parent_tool_use_id"):
            event["parent_tool_use_id"] = obj["parent_tool_use_id"]
        events.append(event)
    return events


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


class StreamReader:
    """One pass over the stream objects: the flat events and the summary together."""

    def __init__(self, cap: int = RESULT_CAP) -> None:
        self.cap = cap
        self.events: list[dict[str, Any]] = []
        self._summary = StreamSummary()
        self._names: dict[str, str] = {}
        self._denials: list[dict[str, Any]] = []

    def feed(self, obj: Mapping[str, Any]) -> None:
        obj = dict(obj)
        kind = obj.get("type")
        if kind == "assistant":
            event = _assistant_event(obj, self.cap)
            for tool in event["tools"]:
                self._names[tool["id"]] = tool["name"]
            self.events.append(event)
        elif kind == "user":
            self.events.extend(_tool_results(obj, self._names, self.cap))
        elif kind == "result":
            self.events.append({"type": "result", "cost_usd": obj.get("total_cost_usd"),
                                "num_turns": obj.get("num_turns"), "timestamp": None})
            self._result(obj)
        elif kind == "system":
            event = {"type": "system", "subtype": obj.get("subtype", ""), "timestamp": obj.get("timestamp")}
            if obj.get("subtype") == "init":
                event["model"] = obj.get("model", "")
                self._summary.session_id = obj.get("session_id") or self._summary.session_id
                self._summary.model = obj.get("model") or self._summary.model
            self.events.append(event)

    def _result(self, obj: dict[str, Any]) -> None:
        summary = self._summary
        # The summary keeps the result's scalars; its bulky lists are read here, not kept twice.
        summary.result = {k: (_cap(v, self.cap)[0] if isinstance(v, str) else v)
                          for k, v in obj.items() if k not in ("permission_denials", "modelUsage")}
        summary.session_id = obj.get("session_id") or summary.session_id
        if isinstance(obj.get("total_cost_usd"), (int, float)):
            summary.cost_usd = float(obj["total_cost_usd"])
        if isinstance(obj.get("num_turns"), int):
            # Turns only add up: a later result with fewer is not the session's count.
            summary.num_turns = max(summary.num_turns or 0, obj["num_turns"])
        usage = obj.get("usage")
        if isinstance(usage, dict):
            summary.token_usage = {k: int(usage[k]) for k in _USAGE_KEYS if isinstance(usage.get(k), int)}
        # A session that waits for background tasks emits one result event per
        # segment, each with only its own denials: keep them all.
        if isinstance(obj.get("permission_denials"), list):
            self._denials.extend(d for d in obj["permission_denials"] if isinstance(d, dict))

    def summary(self) -> StreamSummary:
        summary = self._summary
        seen: set[str] = set()
        summary.permission_denials = []
        for denial in self._denials:
            key = denial.get("tool_use_id")
            if key and key in seen:
                continue
            if key:
                seen.add(key)
            summary.permission_denials.append(denial)
        summary.unknown_command = None
        if summary.result is not None:
            turns = summary.result.get("num_turns")
            text = summary.result_text
            if text and not (isinstance(turns, (int, float)) and turns > 0):
                match = _UNKNOWN_COMMAND.match(text.strip())
                summary.unknown_command = match.group(1) if match else None
        return summary


def read_stream(
    objects: Iterable[Mapping[str, Any]], cap: int = RESULT_CAP
) -> tuple[list[dict[str, Any]], StreamSummary]:
    """The events and the summary of a stream's objects."""
    reader = StreamReader(cap)
    for obj in objects:
        reader.feed(obj)
    return reader.events, reader.summary()


def background_tasks_killed(stderr_text: str) -> bool:
    return bool(_BG_KILL.search(stderr_text))
