"""A cassette as a `model_script.yaml` (pure): a recorded live case becomes a hand-editable offline one.

Each recorded Messages exchange becomes one step, in the order the requests
arrived: its text, its tool calls (`tool` + `input`, or `tool_calls`) and its
usage (so the offline case costs what the live one did); an error answer
becomes an `error` step. What a script cannot say is left out and listed in
a comment: thinking, server tools, a stop reason other than end_turn /
tool_use. Token-count requests are not steps (the scripted server answers
them itself), nor is an exchange the client left before it was answered.

Which `advance`: `per_turn` (the default of scripts) picks a step by the
number of assistant turns in a request's history. It is stateless — a
request the CLI retries gets the same step — but it holds only when the
recording is one conversation with exactly one request per turn. Subagents
(each conversation starts again at turn 0), side requests and recorded
retries or errors break that; `per_request` (steps in the order requests
arrive) replays those faithfully as long as the requests come in the same
order, which they do unless subagents run in parallel. So: per_turn when
the recording allows it, per_request otherwise (or as asked).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from agent_eval_sandbox.gateway.api_errors import STATUS_BY_TYPE
from agent_eval_sandbox.gateway.cassette import Cassette, Entry
from agent_eval_sandbox.gateway.script import Advance, count_assistant_messages
from agent_eval_sandbox.gateway.sse import MessageAssembler, SSEDecoder
from agent_eval_sandbox.gateway.usage import usage_from_api

MESSAGES_PATH = "/v1/messages"
_SCRIPTED_BLOCKS = frozenset({"text", "tool_use"})
_SCRIPTED_STOPS = frozenset({None, "end_turn", "tool_use"})


@dataclass(frozen=True)
class ConvertedStep:
    step: dict[str, Any]
    comment: str  # where it came from, and what of the answer a script cannot hold
    assistant_turns: int  # in the request it answered
    is_error: bool


def is_messages_request(entry: Entry) -> bool:
    return entry.method == "POST" and entry.path.split("?", 1)[0] == MESSAGES_PATH


def response_message(entry: Entry) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the answer message, the API error) of a recorded exchange, whichever it holds."""
    response = entry.response
    if response is None:
        return None, None
    if response.is_stream:
        decoder, assembler = SSEDecoder(), MessageAssembler()
        for event in decoder.feed(response.body_bytes() + b"\n\n"):
            assembler.feed(event)
        if assembler.error is not None and not assembler.message.get("content"):
            return None, assembler.error
        return assembler.message, None
    try:
        body = json.loads(response.body_bytes())
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return None, {"type": "api_error", "message": f"unreadable response (HTTP {response.status})"}
    if response.status != 200 or body.get("type") == "error":
        error = body.get("error")
        return None, {**(error if isinstance(error, dict) else {}), "status": response.status}
    return body, None


def _error_step(error: Mapping[str, Any]) -> dict[str, Any]:
    kind = error.get("type")
    kind = kind if isinstance(kind, str) and kind else "api_error"
    status = error.get("status")
    spec: dict[str, Any] = {"status": status if isinstance(status, int) else STATUS_BY_TYPE.get(kind, 500),
                            "type": kind}
    if isinstance(error.get("message"), str):
        spec["message"] = error["message"]
    return {"error": spec}


def _usage(message: Mapping[str, Any]) -> dict[str, int]:
    usage = usage_from_api(message.get("usage"))
    return {k: v for k, v in usage.model_dump().items() if v or k in ("input_tokens", "output_tokens")}


def _message_step(message: Mapping[str, Any], request: Any) -> tuple[dict[str, Any], list[str]]:
    blocks = [b for b in message.get("content") or [] if isinstance(b, Mapping)]
    left_out = sorted({str(b.get("type")) for b in blocks if b.get("type") not in _SCRIPTED_BLOCKS})
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
    calls: list[dict[str, Any]] = [
        {"tool": str(b.get("name", "")), "input": b.get("input") if isinstance(b.get("input"), dict) else {}}
        for b in blocks if b.get("type") == "tool_use"
    ]
    step: dict[str, Any] = {}
    if texts or not calls:
        step["text"] = "".join(texts)
    if len(calls) == 1:
        step.update(calls[0])
    elif calls:
        step["tool_calls"] = calls
    step["usage"] = _usage(message)
    requested = request.get("model") if isinstance(request, Mapping) else None
    if isinstance(message.get("model"), str) and message["model"] != requested:
        step["model"] = message["model"]
    notes = [f"left out: {', '.join(left_out)} block(s)"] if left_out else []
    if message.get("stop_reason") not in _SCRIPTED_STOPS:
        notes.append(f"it stopped with {message.get('stop_reason')!r}, a script cannot")
    return step, notes


def convert_entry(entry: Entry) -> ConvertedStep | None:
    """The step of one exchange, or None when it makes none (not a Messages request, never answered)."""
    if not is_messages_request(entry):
        return None
    message, error = response_message(entry)
    turns = count_assistant_messages(entry.request) if isinstance(entry.request, Mapping) else 0
    where = f"seq {entry.seq}: {turns} assistant turn(s) in the request"
    if error is not None:
        return ConvertedStep(_error_step(error), f"{where}; answered with an error", turns, True)
    if message is None:
        return None
    step, notes = _message_step(message, entry.request)
    return ConvertedStep(step, "; ".join([where, *notes]), turns, False)


def choose_advance(steps: list[ConvertedStep]) -> Advance:
    """per_turn when each step answers the turn of its own position, one conversation without errors."""
    linear = all(s.assistant_turns == i and not s.is_error for i, s in enumerate(steps))
    return Advance.PER_TURN if linear else Advance.PER_REQUEST


def cassette_to_script(cassette: Cassette, advance: Advance | None = None) -> str:
    """The model_script.yaml text of a cassette (its steps, commented)."""
    steps = [s for s in (convert_entry(e) for e in cassette.entries) if s is not None]
    chosen = advance or choose_advance(steps)
    skipped = len(cassette.entries) - len(steps)
    lines = [
        f"# Made by `agent-eval-sandbox cassette to-script` from {cassette.source or 'a cassette'}",
        f"# (case {cassette.header.case_id or '?'}, recorded {cassette.header.created_at or '?'}).",
        f"# One step per recorded Messages request, in the order the requests arrived; {skipped} other "
        "exchange(s) (token counts, unanswered) are not steps.",
        f"# advance: {chosen.value} — " + (
            "one conversation, one request per turn: the step is picked by the turns in the request."
            if chosen is Advance.PER_TURN else
            "steps are served in the order requests arrive (subagents, side requests or retries were recorded)."),
    ]
    if not cassette.complete:
        lines.append("# WARNING: the cassette is incomplete (the recording did not end cleanly or hit its size cap).")
    lines += [f"advance: {chosen.value}", "steps:" if steps else "steps: []"]
    for converted in steps:
        lines.append(f"# {converted.comment}")
        dumped = yaml.safe_dump([converted.step], sort_keys=False, allow_unicode=True, width=100)
        lines.append(dumped.rstrip("\n"))
    return "\n".join(lines) + "\n"

