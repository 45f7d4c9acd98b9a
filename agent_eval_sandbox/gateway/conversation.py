"""The gateway's own record of a case's conversation, to check the agent's stream against.

The CLI's stdout is what the run directory keeps of the conversation, but it
passes through processes inside the sandbox; the gateway sees the model's
answers and the CLI's requests first-hand, on the host. The record keeps a
compact fingerprint of each: every response message (its id and a digest of
each content block) and every tool result the CLI sent back, so that a tool
call, a text or a final result the model never produced can be told apart
from the real ones (`runner/integrity.py`). Digests, not bodies: the record
stays small however much the case sends, and it is complete even when the
request log stops keeping bodies at its size cap.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Past this many entries the record stops growing and says so: verification
# then treats what it could not record as unverifiable, never as verified.
MAX_MESSAGES = 50_000
MAX_TOOL_RESULTS = 200_000
RECENT_TEXTS = 16


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


# The CLI appends notes of its own to a tool's output before sending it to the model.
_REMINDER = "\n\n<system-reminder>"


def tool_result_digests(text: str) -> set[str]:
    """Digests of a tool result as sent, and of it without the CLI's appended reminders:
    the stream shows the tool's output alone."""
    digests = {digest(text)}
    cut = text.find(_REMINDER)
    while cut >= 0:
        digests.add(digest(text[:cut]))
        cut = text.find(_REMINDER, cut + 1)
    return digests


def block_fingerprint(block: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, digest) of a response content block; None for kinds that are not checked."""
    kind = block.get("type")
    if kind == "text":
        return "text", digest(block.get("text", ""))
    if kind in ("tool_use", "server_tool_use"):
        return "tool_use", digest([block.get("id", ""), block.get("name", ""), block.get("input", {})])
    return None


@dataclass
class ConversationSnapshot:
    """What the gateway saw of one case, frozen for verification (pure data)."""

    # message id -> fingerprints of its blocks, in order
    messages: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # The message ids in the order their responses ended: the last root text is the final answer.
    order: list[str] = field(default_factory=list)
    # tool_use_id -> digests of every tool_result content the CLI sent for it
    tool_results: dict[str, set[str]] = field(default_factory=dict)
    session_ids: set[str] = field(default_factory=set)
    # The whole text of the most recent messages only: the final answer is one of them.
    recent_texts: dict[str, str] = field(default_factory=dict)
    overflow: bool = False


class ConversationRecord:
    """Thread-safe: the gateway's handler threads of one channel record into it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = ConversationSnapshot()

    def record_request(self, body: Any, headers: Mapping[str, str]) -> None:
        """A Messages request the CLI sent: its session id and the tool results it carries."""
        session = next((v for k, v in headers.items() if k.lower() == "x-claude-code-session-id"), None)
        results: list[tuple[str, set[str]]] = []
        if isinstance(body, Mapping) and isinstance(body.get("messages"), list):
            for message in body["messages"]:
                if not isinstance(message, Mapping) or message.get("role") != "user":
                    continue
                content = message.get("content")
                for block in content if isinstance(content, list) else ():
                    if isinstance(block, Mapping) and block.get("type") == "tool_result":
                        tool_use_id = block.get("tool_use_id")
                        if isinstance(tool_use_id, str):
                            results.append((tool_use_id, tool_result_digests(tool_result_text(block.get("content")))))
        with self._lock:
            snapshot = self._snapshot
            if isinstance(session, str) and session and len(snapshot.session_ids) < 64:
                snapshot.session_ids.add(session)
            for tool_use_id, values in results:
                known = snapshot.tool_results.get(tool_use_id)
                if known is None and len(snapshot.tool_results) >= MAX_TOOL_RESULTS:
                    snapshot.overflow = True
                    continue
                snapshot.tool_results.setdefault(tool_use_id, set()).update(values)

    def record_response(self, message: Any) -> None:
        """A response message the model produced (non-streamed, or assembled from a stream)."""
        if not isinstance(message, Mapping) or not isinstance(message.get("id"), str):
            return
        content = message.get("content")
        blocks = [block_fingerprint(b) for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
        texts = [b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"] \
            if isinstance(content, list) else []
        with self._lock:
            snapshot = self._snapshot
            if message["id"] not in snapshot.messages and len(snapshot.messages) >= MAX_MESSAGES:
                snapshot.overflow = True
                return
            snapshot.messages[message["id"]] = [b for b in blocks if b is not None]
            snapshot.order.append(message["id"])
            if texts:
                recent = snapshot.recent_texts
                recent.pop(message["id"], None)
                recent[message["id"]] = "".join(t for t in texts if isinstance(t, str))
                while len(recent) > RECENT_TEXTS:
                    recent.pop(next(iter(recent)))

    def snapshot(self) -> ConversationSnapshot:
        with self._lock:
            current = self._snapshot
            return ConversationSnapshot(
                messages={k: list(v) for k, v in current.messages.items()},
                order=list(current.order),
                tool_results={k: set(v) for k, v in current.tool_results.items()},
                session_ids=set(current.session_ids),
                recent_texts=dict(current.recent_texts),
                overflow=current.overflow,
            )
