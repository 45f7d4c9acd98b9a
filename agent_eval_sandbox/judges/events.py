"""What judges derive from the flat event list of `events.json` (pure).

The event schema is agent-eval-harness's (see `runner/events.py`, which writes
it): `assistant` events carry `text`, `tools` and optional `thinking`;
`tool_result` events carry `tool_use_id`, `content`, `is_error`; a
`parent_tool_use_id` marks an event of a subagent. Files are untrusted, so
every accessor tolerates missing or mistyped fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

# Tool-name aliases across runners, matched case-insensitively.
_READ_TOOLS = {"read", "read_file", "readfile", "view", "cat", "open"}
_WRITE_TOOLS = {"write", "write_file", "writefile", "create", "edit", "multiedit", "notebookedit", "str_replace_editor"}
_EXEC_TOOLS = {"bash", "shell", "exec", "execute", "run", "command"}
_PATH_KEYS = ("file_path", "path", "file", "filename", "notebook_path")
_TRACE_CAP = 200


def _dicts(items: Any) -> Iterable[dict[str, Any]]:
    if isinstance(items, list):
        yield from (item for item in items if isinstance(item, dict))


def _assistant_events(events: Any, *, include_subagents: bool = True) -> Iterable[dict[str, Any]]:
    for event in _dicts(events):
        if event.get("type") != "assistant":
            continue
        if not include_subagents and event.get("parent_tool_use_id"):
            continue
        yield event


def _tools(event: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for tool in _dicts(event.get("tools")):
        if isinstance(tool.get("name"), str) and tool["name"]:
            yield tool


def _input(tool: dict[str, Any]) -> dict[str, Any]:
    value = tool.get("input")
    return value if isinstance(value, dict) else {}


def _first_str(mapping: dict[str, Any], keys: Sequence[str]) -> str:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def conversation_text(events: Any, *, include_thinking: bool = False) -> str:
    """Root-level visible assistant text; with `include_thinking`, each turn's
    extended thinking precedes its text (the `{{ reasoning }}` variable)."""
    parts: list[str] = []
    for event in _assistant_events(events, include_subagents=False):
        thinking = event.get("thinking")
        if include_thinking and isinstance(thinking, str) and thinking:
            parts.append(f"[thinking]\n{thinking}")
        text = event.get("text")
        if isinstance(text, str) and text:
            parts.append(text)
    return "\n\n".join(parts)


def captured_tool_calls(events: Any, patterns: Sequence[str] | None) -> list[dict[str, Any]]:
    """Root-level tool calls `{name, input, id, result, is_error}`.

    With `patterns` (the `outputs[].tool` entries) only calls whose name
    contains a pattern are kept, as the reference matches them; with None,
    every root-level call is.
    """
    results: dict[str, dict[str, Any]] = {}
    for event in _dicts(events):
        if event.get("type") == "tool_result" and isinstance(event.get("tool_use_id"), str):
            results.setdefault(event["tool_use_id"], event)  # the first result of a call is its result
    calls: list[dict[str, Any]] = []
    for event in _assistant_events(events, include_subagents=False):
        for tool in _tools(event):
            name = tool["name"]
            if patterns is not None and not any(pattern in name for pattern in patterns):
                continue
            raw_id = tool.get("id")
            tool_id = raw_id if isinstance(raw_id, str) else ""
            result = results.get(tool_id, {})
            call = {
                "name": name,
                "input": _input(tool),
                "id": tool_id,
                "result": result.get("content"),
                "is_error": bool(result.get("is_error", False)),
            }
            if event.get("unverified") or result.get("unverified"):
                call["unverified"] = True  # see the case's integrity report
            calls.append(call)
    return calls


def _short(value: Any, cap: int = _TRACE_CAP) -> str:
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= cap else text[:cap] + "..."


def _describe(name: str, tool_input: dict[str, Any]) -> str:
    lowered = name.lower()
    if lowered in _READ_TOOLS or lowered in _WRITE_TOOLS:
        path = _first_str(tool_input, _PATH_KEYS) or "?"
        extras = [f"{key}={tool_input[key]}" for key in ("offset", "limit") if tool_input.get(key)]
        return ", ".join([path, *extras])
    if lowered in _EXEC_TOOLS:
        return _short(_first_str(tool_input, ("command", "cmd", "script")) or "?")
    if lowered in ("glob", "grep"):
        where = tool_input.get("path")
        pattern = _short(tool_input.get("pattern", "?"))
        return f"{pattern} in {where}" if isinstance(where, str) and where else pattern
    if lowered in ("agent", "task"):
        return _short(tool_input.get("description") or tool_input.get("prompt") or "(no description)")
    for key, value in tool_input.items():
        return f"{key}={_short(value, 100)}"
    return "(no input)"


def tool_trace(events: Any) -> str:
    """One numbered line per tool call, in order; subagent calls are marked."""
    lines: list[str] = []
    for event in _assistant_events(events):
        prefix = "  [subagent] " if event.get("parent_tool_use_id") else ""
        for tool in _tools(event):
            lines.append(f"{prefix}{len(lines) + 1}. {tool['name']}: {_describe(tool['name'], _input(tool))}")
    return "\n".join(lines)


def read_paths(events: Any, *, include_subagents: bool = True, include_grep: bool = True) -> list[str]:
    """Paths the agent read: `Read` calls, and `Grep` calls scoped to a path."""
    paths: list[str] = []
    for event in _assistant_events(events, include_subagents=include_subagents):
        for tool in _tools(event):
            name, tool_input = tool["name"], _input(tool)
            if name == "Read":
                path = tool_input.get("file_path")
            elif name == "Grep" and include_grep:
                path = tool_input.get("path")
                path = None if path == "." else path
            else:
                continue
            if isinstance(path, str) and path:
                paths.append(path)
    return paths


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def evidence_text(events: Any) -> str:
    """A verifiable summary of tool activity, for judges that check claims."""
    tools: Counter[str] = Counter()
    read: set[str] = set()
    written: set[str] = set()
    commands: list[str] = []
    turns: Any = 0
    cost: Any = 0.0
    for event in _dicts(events):
        if event.get("type") == "result":
            turns = event.get("num_turns") or 0
            cost = event.get("cost_usd") or 0.0
    for event in _assistant_events(events):
        for tool in _tools(event):
            name, tool_input = tool["name"], _input(tool)
            tools[name] += 1
            lowered = name.lower()
            path = _first_str(tool_input, _PATH_KEYS)
            if lowered in _READ_TOOLS and path:
                read.add(_basename(path))
            elif lowered in _WRITE_TOOLS and path:
                written.add(_basename(path))
            elif lowered in _EXEC_TOOLS:
                command = _first_str(tool_input, ("command", "cmd", "script"))
                if command:
                    commands.append(_short(command, 80))
    cost_text = f"${cost:.2f}" if isinstance(cost, (int, float)) else "unknown"
    return "\n".join(
        [
            f"Total turns: {turns}",
            f"Cost: {cost_text}",
            f"Tool calls: {dict(tools) if tools else 'none'}",
            f"Commands run: {'; '.join(commands) if commands else 'none'}",
            f"Files read: {', '.join(sorted(read)) if read else 'none'}",
            f"Files written: {', '.join(sorted(written)) if written else 'none'}",
        ]
    )
