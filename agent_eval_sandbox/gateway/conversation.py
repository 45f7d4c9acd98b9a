"""The gateway's own record of a case's conversation, to check the agent's stream against.

The CLI's stdout is what the run directory keeps of the conversation, but it
passes through processes inside the sandbox; the gateway sees the model's
answers and the CLI's requests first-hand, on the host. The record keeps a
compact fingerprint of each (runner/integrity.py checks the stream with it):

- every response message: its id, a digest of each content block, and the
  session of the request it answered (the CLI's `X-Claude-Code-Session-Id`);
- what later requests carried back: the assistant blocks in their history
  ("adopted": the CLI took the answer into its conversation) and the tool
  results the CLI sent for each call.

A message the agent got by asking the model itself (straight to its gateway
socket) is in the record too, but nothing of the CLI's conversation carries
it on, and it answered a request of another session or none. Digests, not
bodies: the record stays small however much the case sends, and it is
complete even when the request log stops keeping bodies at its size cap.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Past this many entries the record stops growing and says so: verification
# then treats what it could not record as unverifiable, never as verified.
MAX_MESSAGES = 50_000
MAX_TOOL_RESULTS = 200_000
MAX_ADOPTED = 500_000
RECENT_TEXTS = 16
SESSION_HEADER = "x-claude-code-session-id"
# The CLI appends notes of its own to a tool's output before sending it to the model.
_REMINDER = "\n\n<system-reminder>"
# The CLI prints a Bash call that begins by changing to its shell's current directory without
# that `cd` (2.1.332: `cd /workspace && make` is printed as `make`; a quoted path, a trailing
# slash, `;`, `||` or `&&` without its spaces are printed as sent). That directory moves with
# the agent's own `cd`s, so the record accepts the shortened form for any absolute path.
_LEADING_CD = re.compile(r"cd /\S* && ")

Fingerprint = tuple[str, str]  # (block kind, digest)


def digest(value: Any) -> str:
    """A stable digest of JSON-like data (key order does not matter)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


def tool_result_text(content: Any) -> str:
    """The text of a tool_result block's content, however it is shaped (string or blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            else part if isinstance(part, str) else ""
            for part in content
        )
    return "" if content is None else str(content)


def result_digest(content: Any) -> str:
    """How a tool result is compared: its text, without surrounding whitespace."""
    return digest(tool_result_text(content).strip())


def tool_result_digests(content: Any) -> set[str]:
    """Digests of a tool result as the CLI sent it, and of each of its beginnings that stops
    before a note the CLI appended (a `<system-reminder>` in the text, or a block of its
    own): the stream shows the tool's output alone."""
    text = tool_result_text(content)
    cuts = [len(text)]
    cut = text.find(_REMINDER)
    while cut >= 0:
        cuts.append(cut)
        cut = text.find(_REMINDER, cut + 1)
    if isinstance(content, list):
        length = 0
        for part in content:
            length += len(tool_result_text([part]))
            cuts.append(length)
    return {digest(text[:cut].strip()) for cut in cuts}


def block_fingerprint(block: Mapping[str, Any]) -> Fingerprint | None:
    """(kind, digest) of a content block; None for kinds that are not checked."""
    kind = block.get("type")
    if kind == "text":
        return "text", digest(block.get("text", ""))
    if kind in ("tool_use", "server_tool_use"):
        call = [block.get("id", ""), block.get("name", ""), _defaults_dropped(block.get("input", {}))]
        return "tool_use", digest(call)
    return None


def streamed_alias(block: Mapping[str, Any]) -> tuple[Fingerprint, Fingerprint] | None:
    """(fingerprint of the block as the CLI's stream shows it, of the block as the model sent it),
    for a call the stream shows otherwise than the model sent it; else None."""
    tool_input = block.get("input")
    if block.get("type") != "tool_use" or block.get("name") != "Bash" or not isinstance(tool_input, Mapping):
        return None
    command = tool_input.get("command")
    if not isinstance(command, str) or (match := _LEADING_CD.match(command)) is None:
        return None
    sent = block_fingerprint(block)
    shown = block_fingerprint({**block, "input": {**tool_input, "command": command[match.end():]}})
    assert sent is not None and shown is not None
    return shown, sent


def _defaults_dropped(tool_input: Any) -> Any:
    """A tool call's input without its top-level false/null fields.

    The CLI's stream fills in defaults the model left out (Edit gets `"replace_all": false`): such a
    field says no more than its absence. A true, a number or a text is never dropped, so the call's
    meaning cannot change between what the model sent and what the stream shows.
    """
    if not isinstance(tool_input, Mapping):
        return tool_input
    return {k: v for k, v in tool_input.items() if v is not None and v is not False}


def session_of(headers: Mapping[str, str]) -> str | None:
    value = next((v for k, v in headers.items() if k.lower() == SESSION_HEADER), None)
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class RecordedMessage:
    blocks: tuple[Fingerprint, ...]
    session: str | None  # the session of the request it answered
    text: str | None = None  # digest of its text blocks joined (what a final `result` says), if any
    # A block as the CLI's stream may show it -> the block as the model sent it (`streamed_alias`).
    aliases: tuple[tuple[Fingerprint, Fingerprint], ...] = ()


@dataclass
class ConversationSnapshot:
    """What the gateway saw of one case, frozen for verification (pure data)."""

    messages: dict[str, RecordedMessage] = field(default_factory=dict)
    # The message ids in the order their responses ended.
    order: list[str] = field(default_factory=list)
    # Assistant blocks that later requests carried back in their history (by `adoption_key`).
    adopted: set[Fingerprint] = field(default_factory=set)
    # tool_use_id -> digests of every tool_result content the CLI sent for it
    tool_results: dict[str, set[str]] = field(default_factory=dict)
    session_ids: set[str] = field(default_factory=set)
    # The whole text of the most recent messages only: the final answer is one of them.
    recent_texts: dict[str, str] = field(default_factory=dict)
    overflow: bool = False

    def texts_of_session(self, session: str | None) -> set[str]:
        """Digests of the texts the model answered `session` with."""
        return {m.text for m in self.messages.values() if m.session == session and m.text is not None}

    def last_of_session(self, session: str | None) -> str | None:
        """The id of the last message that answered a request of `session`."""
        for message_id in reversed(self.order):
            if self.messages[message_id].session == session:
                return message_id
        return None


def adoption_key(block: Mapping[str, Any]) -> Fingerprint | None:
    """How a block is recognised when a later request carries it back: a tool call by its id (the
    CLI may normalise its input), a text by its digest."""
    kind = block.get("type")
    if kind in ("tool_use", "server_tool_use") and isinstance(block.get("id"), str):
        return "tool_use", block["id"]
    if kind == "text":
        return "text", digest(block.get("text", ""))
    return None


def _history_fingerprints(body: Mapping[str, Any]) -> tuple[list[Fingerprint], list[tuple[str, set[str]]]]:
    """The assistant blocks (their adoption keys) and the tool results a request carries in its history."""
    adopted: list[Fingerprint] = []
    results: list[tuple[str, set[str]]] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if not isinstance(block, Mapping):
                continue
            if message.get("role") == "assistant":
                key = adoption_key(block)
                if key is not None:
                    adopted.append(key)
            elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                results.append((block["tool_use_id"], tool_result_digests(block.get("content"))))
    return adopted, results


class ConversationRecord:
    """Thread-safe: the gateway's handler threads of one channel record into it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = ConversationSnapshot()

    def record_request(self, body: Any, headers: Mapping[str, str]) -> None:
        """A Messages request: its session, and what of earlier answers it carries back."""
        session = session_of(headers)
        adopted, results = _history_fingerprints(body) if isinstance(body, Mapping) else ([], [])
        with self._lock:
            snapshot = self._snapshot
            if session is not None and len(snapshot.session_ids) < 64:
                snapshot.session_ids.add(session)
            for fingerprint in adopted:
                if len(snapshot.adopted) >= MAX_ADOPTED:
                    snapshot.overflow = True
                    break
                snapshot.adopted.add(fingerprint)
            for tool_use_id, values in results:
                known = snapshot.tool_results.get(tool_use_id)
                if known is None and len(snapshot.tool_results) >= MAX_TOOL_RESULTS:
                    snapshot.overflow = True
                    continue
                snapshot.tool_results.setdefault(tool_use_id, set()).update(values)

    def record_response(self, message: Any, headers: Mapping[str, str] | None = None) -> None:
        """A response message the model produced, for a request with `headers`."""
        if not isinstance(message, Mapping) or not isinstance(message.get("id"), str):
            return
        content = message.get("content")
        blocks = [block_fingerprint(b) for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        texts = [b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"] \
            if isinstance(content, list) else []
        joined = "".join(t for t in texts if isinstance(t, str))
        aliases = [streamed_alias(b) for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        recorded = RecordedMessage(tuple(b for b in blocks if b is not None), session_of(headers or {}),
                                   digest(joined) if texts else None, tuple(a for a in aliases if a is not None))
        with self._lock:
            snapshot = self._snapshot
            if message["id"] not in snapshot.messages and len(snapshot.messages) >= MAX_MESSAGES:
                snapshot.overflow = True
                return
            snapshot.messages[message["id"]] = recorded
            snapshot.order.append(message["id"])
            if texts:
                recent = snapshot.recent_texts
                recent.pop(message["id"], None)
                recent[message["id"]] = joined
                while len(recent) > RECENT_TEXTS:
                    recent.pop(next(iter(recent)))

    def snapshot(self) -> ConversationSnapshot:
        with self._lock:
            current = self._snapshot
            return ConversationSnapshot(
                messages=dict(current.messages),
                order=list(current.order),
                adopted=set(current.adopted),
                tool_results={k: set(v) for k, v in current.tool_results.items()},
                session_ids=set(current.session_ids),
                recent_texts=dict(current.recent_texts),
                overflow=current.overflow,
            )
