"""A case's conversation (events.json, runner/events.py) as readable HTML (pure).

Turns in order: the assistant's text, its tool calls — each with its input and
the result that came back, side by side — and subagent turns inside the call
that started them. Long text and every tool call fold (`<details>`), so the
page reads top to bottom without JavaScript. Lines the integrity check could
not verify are marked where they stand. Everything is cut to the case's
budget, with a marker saying where the rest is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_eval_sandbox.report.html_parts import Budget, count, cut_note, esc, money, one_line, pre

TEXT_CAP = 20_000  # assistant text
PIECE_CAP = 8_000  # one tool input value, one tool result, thinking
_FOLD_CHARS = 1_500  # text longer than this (or with more lines) folds
_FOLD_LINES = 24
_MAX_DEPTH = 4  # subagents of subagents…
_PREVIEW_KEYS = ("command", "file_path", "path", "notebook_path", "pattern", "url", "query", "skill", "description",
                 "prompt")

UNVERIFIED = ('<span class="badge warn" title="not confirmed by the gateway\'s record of what the model was sent">'
              "unverified</span>")


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class _Conversation:
    """The events indexed: results by call, subagent turns by the call that started them."""

    events: Sequence[Mapping[str, Any]]
    where: str  # the file that has everything, for cut markers
    budget: Budget
    results: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    children: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    calls: set[str] = field(default_factory=set)
    rendered_calls: set[str] = field(default_factory=set)
    shown: set[int] = field(default_factory=set)  # ids of the events already on the page
    turn: int = 0

    def __post_init__(self) -> None:
        for event in self.events:
            if event.get("type") == "assistant":
                for tool in _tools(event):
                    self.calls.add(_str(tool.get("id")))
        self.calls.discard("")
        for event in self.events:
            parent = _str(event.get("parent_tool_use_id"))
            if event.get("type") == "tool_result":
                call = _str(event.get("tool_use_id"))
                if call in self.calls and call not in self.results:
                    self.results[call] = event
                    continue
            if parent and parent in self.calls:
                self.children.setdefault(parent, []).append(event)

    def is_nested(self, event: Mapping[str, Any]) -> bool:
        if event.get("type") == "tool_result" and self.results.get(_str(event.get("tool_use_id"))) is event:
            return True
        return _str(event.get("parent_tool_use_id")) in self.calls

    def render(self, events: Sequence[Mapping[str, Any]], depth: int) -> str:
        parts: list[str] = []
        for index, event in enumerate(events):
            if self.budget.spent:
                parts.append(self.budget.take(
                    f'<div class="cut">… {count(len(events) - index)} more events not shown: the report\'s'
                    f" space for this case is used up; the whole conversation is in <code>{esc(self.where)}</code>"
                    " in the run directory</div>"))
                break
            if id(event) not in self.shown:
                self.shown.add(id(event))
                parts.append(self.event(event, depth))
        return "".join(parts)

    def event(self, event: Mapping[str, Any], depth: int) -> str:
        kind = event.get("type")
        if kind == "assistant":
            return self.assistant(event, depth)
        if kind == "tool_result":
            call = esc(one_line(_str(event.get("tool_use_id")), 80))
            head = f'<div class="who">tool result for an unknown call <code>{call}</code></div>'
            return self.budget.take(f'<div class="turn orphan">{head}') + self.result(event) + "</div>"
        if kind == "system":
            subtype = _str(event.get("subtype"))
            model = _str(event.get("model"))
            what = f"session started · model <code>{esc(model)}</code>" if subtype == "init" else esc(
                f"system event: {one_line(subtype, 80) or '(no subtype)'}")
            return self.budget.take(f'<div class="sys">{what}</div>')
        if kind == "result":
            turns = event.get("num_turns")
            cost = event.get("cost_usd")
            bits = ["session ended"]
            if isinstance(turns, int) and not isinstance(turns, bool):
                bits.append(f"{turns} turns")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                bits.append(f"{money(float(cost))} as the CLI counted it")
            return self.budget.take(f'<div class="sys">{esc(" · ".join(bits))}</div>')
        return self.budget.take(f'<div class="sys">{esc(f"event of type {one_line(str(kind), 60)}")}</div>')

    def assistant(self, event: Mapping[str, Any], depth: int) -> str:
        marks = UNVERIFIED if event.get("unverified") else ""
        if depth:
            head = f'<div class="who">subagent {marks}</div>'
        else:
            self.turn += 1
            head = f'<div class="who">assistant <span class="muted">turn {self.turn}</span> {marks}</div>'
        parts = [self.budget.take(f'<div class="turn assistant">{head}')]
        thinking = _str(event.get("thinking"))
        if thinking:
            parts.append(self.budget.take(f"<details class=\"thinking\"><summary>thinking · {count(len(thinking))}"
                                          " characters</summary>"))
            parts.append(pre(self.budget, thinking, PIECE_CAP, self.where) + self.budget.take("</details>"))
        text = _str(event.get("text"))
        if text:
            parts.append(self.text(text))
        for tool in _tools(event):
            parts.append(self.tool(tool, depth))
        parts.append(self.budget.take("</div>"))
        return "".join(parts)

    def text(self, text: str) -> str:
        if len(text) <= _FOLD_CHARS and text.count("\n") < _FOLD_LINES:
            markup, omitted = self.budget.text(text, TEXT_CAP)
            return f'<div class="say">{markup}</div>{cut_note(omitted, self.where)}'
        lines = text.count("\n") + 1
        summary = (f'<summary><span class="say-preview">{esc(one_line(text, 200))}</span>'
                   f' <span class="muted">· {count(lines)} lines, {count(len(text))} characters</span></summary>')
        markup, omitted = self.budget.text(text, TEXT_CAP)
        return self.budget.take(f'<details class="say-long">{summary}') + (
            f'<div class="say">{markup}</div>{cut_note(omitted, self.where)}</details>')

    def tool(self, tool: Mapping[str, Any], depth: int) -> str:
        call = _str(tool.get("id"))
        name = one_line(_str(tool.get("name")), 80) or "(unnamed tool)"
        tool_input = tool.get("input")
        result = self.results.get(call) if call not in self.rendered_calls else None
        self.rendered_calls.add(call)
        status = _result_badge(result)
        failed = result is not None and result.get("is_error") is True
        preview = _preview(tool_input)
        summary = (f'<summary><span class="tname">{esc(name)}</span>'
                   f'{f" <code class=preview>{esc(preview)}</code>" if preview else ""} {status}</summary>')
        parts = [self.budget.take(f'<details class="tool{" err" if failed else ""}"{" open" if failed else ""}>'
                                  f'{summary}<div class="tbody"><div class="label">input</div>')]
        parts.append(self.tool_input(tool_input))
        if result is not None:
            parts.append(self.budget.take('<div class="label">result</div>') + self.result(result))
        children = self.children.get(call, [])
        if children and depth >= _MAX_DEPTH:
            parts.append(self.budget.take(f'<div class="cut">{count(len(children))} subagent events nested too deep'
                                          f" to show here; they are in <code>{esc(self.where)}</code></div>"))
        elif children:
            parts.append(self.budget.take(f'<div class="subagent"><div class="label">subagent · {count(len(children))}'
                                          " events</div>"))
            parts.append(self.render(children, depth + 1) + self.budget.take("</div>"))
        parts.append(self.budget.take("</div></details>"))
        return "".join(parts)

    def tool_input(self, value: object) -> str:
        if not isinstance(value, Mapping):
            return pre(self.budget, _json(value), PIECE_CAP, self.where)
        if not value:
            return self.budget.take('<div class="muted">(no input)</div>')
        rows = []
        for key, item in list(value.items())[:50]:
            text = item if isinstance(item, str) else _json(item)
            rows.append(self.budget.take(f'<div class="kv"><span class="k">{esc(one_line(str(key), 80))}</span>')
                        + pre(self.budget, text, PIECE_CAP, self.where) + "</div>")
        if len(value) > 50:
            rows.append(self.budget.take(f'<div class="cut">… {count(len(value) - 50)} more keys not shown</div>'))
        return "".join(rows)

    def result(self, event: Mapping[str, Any]) -> str:
        notes = []
        if event.get("unverified"):
            notes.append(UNVERIFIED)
        original = event.get("original_length")
        if event.get("truncated") and isinstance(original, int):
            notes.append(f'<span class="muted">cut by the tool to {count(len(_str(event.get("content"))))}'
                         f" of {count(original)} characters</span>")
        head = self.budget.take(f'<div class="rnotes">{" ".join(notes)}</div>') if notes else ""
        self.shown.add(id(event))
        css = "result err" if event.get("is_error") is True else "result"
        return head + pre(self.budget, _str(event.get("content")) or "(empty)", PIECE_CAP, self.where, css)


def _tools(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = event.get("tools")
    return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []


def _json(value: object) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _preview(tool_input: object) -> str:
    if not isinstance(tool_input, Mapping):
        return ""
    for key in _PREVIEW_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            return one_line(value, 140)
    return one_line(_json(dict(tool_input)), 140) if tool_input else ""


def _result_badge(result: Mapping[str, Any] | None) -> str:
    if result is None:
        return '<span class="badge skip" title="no result came back: the session ended first">no result</span>'
    if result.get("is_error") is True:
        return '<span class="badge fail">error</span>'
    return '<span class="badge pass">ok</span>' + (f" {UNVERIFIED}" if result.get("unverified") else "")


def render_conversation(events: Sequence[Mapping[str, Any]], budget: Budget, where: str) -> str:
    """The conversation's HTML, within `budget`; `where` names the file with the whole of it."""
    conversation = _Conversation(events, where, budget)
    top = [e for e in events if not conversation.is_nested(e)]
    if not events:
        return '<p class="muted">The conversation is empty: the agent produced no turns.</p>'
    body = conversation.render(top, 0)
    # Events that hang off no call on the page (a loop of subagent parents) are still shown.
    rest = [e for e in events if id(e) not in conversation.shown]
    if rest and not budget.spent:
        body += budget.take(f'<div class="label">{count(len(rest))} events outside the conversation\'s order</div>')
        body += conversation.render(rest, _MAX_DEPTH)
    return f'<div class="conversation">{body}</div>'
