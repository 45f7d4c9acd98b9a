"""Passes when every captured tool call completed without an error.

Required fields: tool_calls
Failure means: a call was flagged `is_error`, its result is a mapping with a
truthy `error`, or its result text starts (first 50 characters) with an error.
No tool calls at all is "nothing to judge" (an error of this judge, not a pass).
"""

from __future__ import annotations

from typing import Any

from agent_eval_sandbox.judges.nothing import NothingToJudge

_HEAD = 50


def _failure(call: dict[str, Any]) -> str | None:
    if call.get("is_error"):
        return "flagged as an error"
    result = call.get("result", call.get("output"))
    if isinstance(result, dict) and result.get("error"):
        return f"error: {str(result['error'])[:_HEAD]}"
    if isinstance(result, str) and "error" in result[:_HEAD].lower():
        return f"result starts {result[:_HEAD]!r}"
    return None


def judge(outputs: dict[str, Any], **_: Any) -> tuple[bool, str]:
    calls = [c for c in outputs.get("tool_calls") or [] if isinstance(c, dict)]
    if not calls:
        raise NothingToJudge("the case made no tool calls to validate")
    failed = [(c.get("name", "?"), why) for c in calls if (why := _failure(c))]
    if not failed:
        return True, f"All {len(calls)} tool calls completed without errors"
    listed = "; ".join(f"{name}: {why}" for name, why in failed[:10])
    more = f" (and {len(failed) - 10} more)" if len(failed) > 10 else ""
    return False, f"{len(failed)} of {len(calls)} tool calls failed — {listed}{more}"
