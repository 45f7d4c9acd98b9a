"""Messages API responses built from script steps (pure, ids injectable)."""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable, Mapping
from typing import Any

from agent_eval_sandbox.gateway.script import Step
from agent_eval_sandbox.gateway.usage import Usage

_ID_ALPHABET = string.ascii_letters + string.digits
DEFAULT_MODEL = "claude-scripted"

IdFactory = Callable[[str], str]


def new_id(prefix: str) -> str:
    """A fresh id shaped like the API's (`toolu_01…`, `msg_01…`)."""
    return prefix + "01" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(22))


def estimate_tokens(value: Any) -> int:
    """About four characters a token: the default usage of a step that states none."""
    return max(1, len(json.dumps(value, separators=(",", ":"))) // 4)


def exhausted_step(index: int, total: int) -> Step:
    return Step(
        text=f"[scripted model server] The script is exhausted: it has {total} step(s) "
        f"and this request asked for step {index}. Ending here."
    )


def reply_message(step: Step, request: Mapping[str, Any], make_id: IdFactory = new_id) -> dict[str, Any]:
    """The assistant message that answers `request` with `step` (not an error step)."""
    content: list[dict[str, Any]] = []
    calls = step.calls
    if step.text is not None and (step.text or not calls):
        content.append({"type": "text", "text": step.text})
    for call in calls:
        content.append({"type": "tool_use", "id": make_id("toolu_"), "name": call.tool, "input": call.input})
    usage = step.usage or Usage(input_tokens=estimate_tokens(request), output_tokens=estimate_tokens(content))
    # The API never bills more output than the request's max_tokens; neither does the script
    # (a gateway that lowered max_tokens to fit a budget must see the same).
    max_tokens = request.get("max_tokens")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and 0 < max_tokens < usage.output_tokens:
        usage = usage.model_copy(update={"output_tokens": max_tokens})
    return {
        "id": make_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": step.model or request.get("model") or DEFAULT_MODEL,
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": usage.to_api(),
    }
