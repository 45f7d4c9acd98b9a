"""Checking the agent's stream-json against the gateway's own record (pure).

The CLI's stdout reaches the host through processes inside the sandbox, so a
skill that got hold of it could write lines of its own: a tool call the model
never asked for, a final result it never gave, a real answer the model gave
to a conversation of the skill's own (it may ask the model itself, through
its gateway socket). The gateway saw every model answer and every request
the CLI sent, first-hand (`gateway/conversation.py`). `StreamVerifier` keeps
a stream object only when that record agrees:

- an `assistant` message must be one the model sent, for a request of this
  session (the stream's first `system/init` names it), each of its text and
  tool_use blocks one of that message's blocks (a Bash call shown without the
  leading `cd <dir> && ` the CLI leaves out of its stream counts as the call
  sent); and it must be part of the session's conversation: carried back in a
  later request (the CLI took it in), or be the session's last answer.
  Subagents' text-only answers (their results reach the parent as a tool
  result) need only the first two;
- a message or block seen twice is dropped the second time (a replay);
- a tool result must answer a kept tool call, and only the first result of a
  call counts. Its content is the output of a tool the agent drives anyway,
  so a content that differs from what the CLI sent the model is kept but
  marked unverified and reported, as are the last results of a session,
  which never went back to the model;
- a `result` event's text must be one the model answered this session, its session one
  the gateway saw, its turns no more than the model's answers and its
  permission denials about calls the model made; otherwise the gateway's
  values replace them. (A session that waits for background tasks prints one
  result per segment, so a later result is not suspect in itself.)

What is dropped or corrected becomes a `Finding`: the run records it and the
judges never see the forged part.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_eval_sandbox.gateway.conversation import (
    ConversationSnapshot,
    Fingerprint,
    adoption_key,
    block_fingerprint,
    digest,
    result_digest,
)

MAX_FINDINGS = 200


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based line of stdout.log
    kind: str  # the stream object's type
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "kind": self.kind, "reason": self.reason}


@dataclass
class StreamVerifier:
    """Feed stream objects in order; `feed` returns what to keep (possibly corrected) or None."""

    record: ConversationSnapshot | None
    findings: list[Finding] = field(default_factory=list)
    dropped: int = 0
    unverified: int = 0
    session: str | None = None  # from the stream's first system/init
    _tool_ids: set[str] = field(default_factory=set)
    _seen_blocks: set[tuple[str, Fingerprint]] = field(default_factory=set)
    _answered: set[str] = field(default_factory=set)

    @property
    def checked(self) -> bool:
        """False when there was no gateway record to check against (nothing reached the model)."""
        return self.record is not None

    def _flag(self, line: int, kind: str, reason: str, *, dropped: bool = True) -> None:
        self.dropped += dropped
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(Finding(line, kind, reason))

    def feed(self, line: int, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        kind = obj.get("type")
        if kind == "system" and obj.get("subtype") == "init" and self.session is None:
            session = obj.get("session_id")
            self.session = session if isinstance(session, str) and session else None
        if kind == "assistant":
            return self._assistant(line, obj)
        if kind == "user":
            return self._user(line, obj)
        if kind == "result":
            return self._result(line, obj)
        return dict(obj)

    # ---- assistant ----------------------------------------------------------------

    def _assistant(self, line: int, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        message = _message(obj)
        content = message.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        if self.record is None:
            self._remember_tools(blocks)
            return dict(obj)
        message_id = message.get("id")
        recorded = self.record.messages.get(message_id) if isinstance(message_id, str) else None
        if recorded is None or not isinstance(message_id, str):  # (only a str id is ever recorded)
            if self.record.overflow:
                self.unverified += 1
                self._remember_tools(blocks)
                return {**obj, "_unverified": True}
            names = ", ".join(
                str(b.get("name")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"
            )
            self._flag(line, "assistant", f"message {message_id!r} was never sent by the model"
                       + (f" (tool calls: {names})" if names else ""))
            return None
        problem = self._not_of_this_conversation(message_id, recorded.session, blocks, subagent=bool(
            obj.get("parent_tool_use_id")))
        if problem:
            self._flag(line, "assistant", problem)
            return None
        # A block as the stream may show it counts as the block the model sent, for replays too.
        aliases = dict(recorded.aliases)
        fingerprints = [_as_sent(block_fingerprint(b), aliases) if isinstance(b, Mapping) else None for b in blocks]
        allowed = set(recorded.blocks)
        for block, fingerprint in zip(blocks, fingerprints, strict=True):
            if fingerprint is not None and fingerprint not in allowed:
                what = block.get("name") if fingerprint[0] == "tool_use" else "text"
                self._flag(line, "assistant", f"a {fingerprint[0]} block ({what}) differs from message "
                           f"{message_id!r} as the model sent it")
                return None
        keys = [(message_id, f) for f in fingerprints if f is not None]
        if keys and all(key in self._seen_blocks for key in keys):
            self._flag(line, "assistant", f"message {message_id!r} appears a second time (a replay)")
            return None
        self._seen_blocks.update(keys)
        self._remember_tools(blocks)
        return dict(obj)

    def _not_of_this_conversation(self, message_id: str, session: str | None, blocks: list[Any], *,
                                  subagent: bool) -> str | None:
        """Why a message the model did send is not this session's, or None."""
        assert self.record is not None
        if self.session is not None and session != self.session:
            return f"message {message_id!r} answered a request of another conversation"
        keys = {adoption_key(b) for b in blocks if isinstance(b, Mapping)} - {None}
        calls = any(k is not None and k[0] == "tool_use" for k in keys)
        if subagent and not calls:
            return None  # a subagent's answer reaches its parent as a tool result, not as history
        if keys & self.record.adopted or message_id == self.record.last_of_session(session):
            return None
        return f"message {message_id!r} was never part of the session's conversation (no later request carried it)"

    def _remember_tools(self, blocks: Iterable[Any]) -> None:
        for block in blocks:
            if isinstance(block, Mapping) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self._tool_ids.add(block["id"])

    # ---- tool results ----------------------------------------------------------------

    def _user(self, line: int, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        message = _message(obj)
        content = message.get("content")
        if not isinstance(content, list):
            return dict(obj)
        kept: list[Any] = []
        for block in content:
            if not isinstance(block, Mapping) or block.get("type") != "tool_result":
                kept.append(block)
                continue
            verdict = self._tool_result(block)
            if verdict is None:
                kept.append(block)
            elif verdict.startswith("unverified"):
                self.unverified += 1
                kept.append({**block, "_unverified": True})
                if verdict != "unverified":
                    self._flag(line, "tool_result", verdict.removeprefix("unverified: "), dropped=False)
            else:
                self._flag(line, "tool_result", verdict)
        if not kept:
            return None
        return {**obj, "message": {**message, "content": kept}}

    def _tool_result(self, block: Mapping[str, Any]) -> str | None:
        """None to keep, "unverified[: why]" to keep marked, or why it is dropped."""
        tool_use_id = block.get("tool_use_id")
        if self.record is None:
            return None
        if not isinstance(tool_use_id, str) or tool_use_id not in self._tool_ids:
            return f"a result for tool call {tool_use_id!r}, which the model never made"
        if tool_use_id in self._answered:
            return f"a second result for tool call {tool_use_id!r} (only the first counts)"
        self._answered.add(tool_use_id)
        sent = self.record.tool_results.get(tool_use_id)
        if sent is None:
            return "unverified"  # the session ended before the CLI sent it to the model
        if result_digest(block.get("content")) not in sent:
            return f"unverified: the result of {tool_use_id!r} differs from what the CLI sent the model"
        return None

    # ---- the final result ------------------------------------------------------------

    def _result(self, line: int, obj: Mapping[str, Any]) -> dict[str, Any]:
        result = dict(obj)
        if self.record is None:
            return result
        sessions = self.record.session_ids
        session = result.get("session_id")
        if sessions and session not in sessions:
            self._flag(line, "result", f"session {session!r} is not the session the gateway saw", dropped=False)
            result["session_id"] = self.session if self.session in sessions else (
                sorted(sessions)[0] if len(sessions) == 1 else None)
        text = result.get("result")
        said = self.record.texts_of_session(self.session)
        if not result.get("is_error") and said and digest(text if isinstance(text, str) else "") not in said:
            final = self._final_text()
            self._flag(line, "result", "its text is nothing the model answered this session; "
                       + ("the model's last answer is used" if final is not None else "it is left out"), dropped=False)
            result["result"] = final
        answers = len(self.record.order)
        turns = result.get("num_turns")
        if isinstance(turns, int) and turns > answers and not self.record.overflow:
            self._flag(line, "result", f"it claims {turns} turns; the model answered {answers} times", dropped=False)
            result["num_turns"] = answers
        denials = result.get("permission_denials")
        if isinstance(denials, list):
            real = [d for d in denials if isinstance(d, Mapping) and d.get("tool_use_id") in self._tool_ids]
            if len(real) != len(denials):
                self._flag(line, "result", f"{len(denials) - len(real)} permission denial(s) of calls the model "
                           "never made", dropped=False)
                result["permission_denials"] = real
        return result

    def _final_text(self) -> str | None:
        """The text of this session's last answer, if the record still holds it."""
        assert self.record is not None
        last = self.record.last_of_session(self.session) if self.session else (
            self.record.order[-1] if self.record.order else None)
        if last is None:
            return None
        return self.record.recent_texts.get(last)

    def report(self) -> dict[str, Any]:
        """The `integrity` entry of the case's run_result.json."""
        return {
            "checked": self.checked,
            "dropped": self.dropped,
            "unverified": self.unverified,
            "findings": [f.as_dict() for f in self.findings],
        }


def _as_sent(fingerprint: Fingerprint | None, aliases: Mapping[Fingerprint, Fingerprint]) -> Fingerprint | None:
    return aliases.get(fingerprint, fingerprint) if fingerprint is not None else None


def _message(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    message = obj.get("message")
    return message if isinstance(message, Mapping) else {}


def verified(objects: Iterable[tuple[int, Mapping[str, Any]]], verifier: StreamVerifier) -> Iterator[dict[str, Any]]:
    """The objects the verifier keeps, in order."""
    for line, obj in objects:
        kept = verifier.feed(line, obj)
        if kept is not None:
            yield kept
