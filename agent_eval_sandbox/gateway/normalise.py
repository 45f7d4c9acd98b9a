"""A request body with what differs between two runs of the same case taken out (pure).

Replay matches the CLI's requests against a cassette by their normalised
bodies: what the CLI sends differently each time for the same conversation
must not count, anything else must. The rules, in order (docs/cassettes.md
lists them for users):

1. secrets: the sandbox's placeholder key (and any `[redacted]` already in a
   cassette) read `[redacted]`, as the cassette wrote them;
2. `metadata.user_id` is dropped (a device id and the session id);
3. every `cache_control` key is dropped (the CLI moves its cache markers);
4. ids the CLI or the model mint per run become ordinals by first
   appearance in the body: tool-use ids (`toolu_…`, `srvtoolu_…`) → `<toolu#N>`,
   background-agent ids (`agentId: X`, `<task-id>X</task-id>`) → `<agent#N>`,
   everywhere they occur;
5. in every string: UUIDs → `<uuid>`; ISO dates and times → `<date>`;
   clock times `HH:MM:SS` → `<time>`; the CLI's budget reminders
   (`USD budget: …`, `<total_tokens>N tokens left`) and durations
   (`<duration_ms>N`) lose their numbers; the billing header's
   `cc_version=…` → `cc_version=<version>`; the `OS Version:` line of the
   environment → `OS Version: <os>`;
6. parallel tool results: the CLI runs a turn's tool calls at once and sends
   their results in the order they finished, with its `<system-reminder>`
   notes appended to whichever came last. In each message the notes are taken
   off the end of every tool result (and the result's trailing whitespace,
   which the CLI trims before appending) and kept, in order, in one block at
   the message's end; the tool results are put in the order of the calls
   they answer (their `<toolu#N>`).

Everything else — the model, the system prompt, the tools, every message and
tool result, max_tokens, thinking — must be equal.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from agent_eval_sandbox.gateway.credentials import PLACEHOLDER_API_KEY
from agent_eval_sandbox.gateway.request_log import REDACTED

_TOOL_ID = re.compile(r"\b(?:srv)?toolu_[A-Za-z0-9_]+")
_AGENT_ID = re.compile(r"(?:agentId: |<task-id>)([A-Za-z0-9_-]+)")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b")
_NUMBER = r"[0-9][0-9.eE+-]*"
_TRAILING_REMINDERS = re.compile(r"(?:\s*<system-reminder>.*?</system-reminder>)+\s*\Z", re.S)
_ORDINAL = re.compile(r"<toolu#(\d+)>")
NOTES_BLOCK = "_notes"  # the block normalisation gathers a message's reminders in
_STRING_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (_UUID, "<uuid>"),
    (_ISO_DATE, "<date>"),
    (_CLOCK, "<time>"),
    (re.compile(rf"USD budget: \${_NUMBER}/\${_NUMBER}; \${_NUMBER} remaining"), "USD budget: <usd>"),
    (re.compile(r"<total_tokens>\d+ tokens left</total_tokens>"), "<total_tokens><n> tokens left</total_tokens>"),
    (re.compile(r"<duration_ms>\d+</duration_ms>"), "<duration_ms><n></duration_ms>"),
    (re.compile(r"cc_version=[^;\s]+"), "cc_version=<version>"),
    (re.compile(r"OS Version: [^\n]*"), "OS Version: <os>"),
)


def _strings(value: Any) -> list[str]:
    """Every string of a JSON value, keys in sorted order (the order ids are numbered in)."""
    found: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, Mapping):
            for key in sorted(item, key=str):
                walk(item[key])
        elif isinstance(item, list):
            for part in item:
                walk(part)

    walk(value)
    return found


def _ordinals(strings: list[str], pattern: re.Pattern[str], group: int) -> dict[str, int]:
    numbers: dict[str, int] = {}
    for text in strings:
        for match in pattern.finditer(text):
            numbers.setdefault(match.group(group), len(numbers) + 1)
    return numbers


def _id_renamer(strings: list[str]) -> Callable[[str], str]:
    tools = _ordinals(strings, _TOOL_ID, 0)
    agents = _ordinals(strings, _AGENT_ID, 1)
    # Longest first: an id that is a prefix of another must not eat part of it.
    names = {**{k: f"<toolu#{n}>" for k, n in tools.items()}, **{k: f"<agent#{n}>" for k, n in agents.items()}}
    if not names:
        return lambda text: text
    any_id = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    return lambda text: any_id.sub(lambda m: names[m.group(0)], text)


def normalise_string(text: str, rename: Callable[[str], str] = lambda t: t) -> str:
    text = text.replace(PLACEHOLDER_API_KEY, REDACTED)
    text = rename(text)
    for pattern, replacement in _STRING_RULES:
        text = pattern.sub(replacement, text)
    return text


def _detach(text: str) -> tuple[str, list[str]]:
    """A tool result's text without the reminders appended to it (and its trailing whitespace); the reminders."""
    match = _TRAILING_REMINDERS.search(text)
    if match is None:
        return text.rstrip(), []
    return text[:match.start()].rstrip(), [match.group(0).strip()]


def _detach_content(content: Any) -> tuple[Any, list[str]]:
    if isinstance(content, str):
        return _detach(content)
    if not isinstance(content, list):
        return content, []
    kept: list[Any] = []
    notes: list[str] = []
    for part in content:
        text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
        if not isinstance(text, str):
            kept.append(part)
            continue
        text, found = _detach(text)
        notes += found
        if text:
            kept.append({**part, "text": text})
    return kept, notes


def _answer_order(block: Any) -> int:
    match = _ORDINAL.fullmatch(str(block.get("tool_use_id", "")))
    return int(match.group(1)) if match else 0


def _settle_tool_results(message: dict[str, Any]) -> dict[str, Any]:
    """Rule 6 on one (already normalised) message."""
    content = message.get("content")
    if not isinstance(content, list) or not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return message
    blocks: list[Any] = []
    notes: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            inner, found = _detach_content(block.get("content"))
            block = {**block, "content": inner}
            notes += found
        blocks.append(block)
    slots = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("type") == "tool_result"]
    for slot, block in zip(slots, sorted((blocks[i] for i in slots), key=_answer_order), strict=True):
        blocks[slot] = block
    if notes:
        blocks.append({"type": NOTES_BLOCK, "text": "\n".join(notes)})
    return {**message, "content": blocks}


def normalise_request(body: Any) -> Any:
    """The body with the rules above applied (a new value; `body` is not changed)."""
    rename = _id_renamer(_strings(body))

    def walk(item: Any, top: bool = False) -> Any:
        if isinstance(item, str):
            return normalise_string(item, rename)
        if isinstance(item, Mapping):
            out = {}
            for key, value in item.items():
                if key == "cache_control":
                    continue
                if top and key == "metadata" and isinstance(value, Mapping):
                    value = {k: v for k, v in value.items() if k != "user_id"}
                    if not value:
                        continue
                out[str(key)] = walk(value)
            return out
        if isinstance(item, list):
            return [walk(part) for part in item]
        return item

    normalised = walk(body, top=True)
    if isinstance(normalised, dict) and isinstance(normalised.get("messages"), list):
        normalised["messages"] = [_settle_tool_results(m) if isinstance(m, dict) else m
                                  for m in normalised["messages"]]
    return normalised


def canonical(value: Any) -> str:
    """One spelling of a JSON value: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(method: str, path: str, body: Any) -> str:
    """What replay matches a request by: its method, its path and its normalised body."""
    text = f"{method} {path}\n{canonical(normalise_request(body))}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
