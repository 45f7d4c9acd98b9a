"""Stage 2, `compile-handlers --llm`: the hook model turns each handler's prompt into checks.

For every handler that gates tools (anything but AskUserQuestion alone), the
model reads `match`, `patterns` and `prompt` and answers one JSON object:

    {"input_filters": ["jira", "JIRA_SERVER"],
     "env_checks": {"JIRA_SERVER": {"must_contain": ["localhost", "test"]}}}

The answer is validated structurally before anything is written: not JSON,
not that shape, or a regex that does not compile is one clear error.
`must_contain` entries are lowercased, because the runtime check compares
them with the lowercased value.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from agent_eval_sandbox.interception.answerer import (
    ANSWER_RETRY,
    GREEDY,
    client_from_env,
    create_message,
    first_text,
)
from agent_eval_sandbox.interception.handlers import (
    ASK_USER_QUESTION,
    EnvCheck,
    Handler,
    HandlersError,
    ToolHandlers,
)
from agent_eval_sandbox.model_api import RetryPolicy

REQUEST_TIMEOUT_S = 120.0
MAX_TOKENS = 1024
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

SYSTEM_PROMPT = """\
You compile tool-interception handlers for a headless agent evaluation harness.
A PreToolUse hook enforces each handler deterministically at runtime:
- A Bash call matches the handler only if one of `input_filters` (Python regexes,
  searched case-insensitively in the command string) matches. Leave input_filters
  empty only if the handler does not gate Bash.
- A matched call is allowed only when every `env_checks` variable's lowercased
  value contains at least one of its `must_contain` substrings; with no env_checks,
  a matched call is always denied.
Answer with ONE JSON object and nothing else:
{"input_filters": ["<regex>", ...], "env_checks": {"<VAR>": {"must_contain": ["<substring>", ...]}}}"""


def needs_refinement(handler: Handler) -> bool:
    """AskUserQuestion-only handlers answer questions; every other handler gates calls."""
    return any(p != ASK_USER_QUESTION for p in handler.patterns)


def handler_request(handler: Handler) -> str:
    return (
        f"match: {handler.match}\n"
        f"patterns: {json.dumps(handler.patterns)}\n"
        f"prompt: {handler.prompt}\n"
    )


def parse_refinement(reply: str | None, handler: Handler, index: int, source: str) -> Handler:
    """The handler with the model's input_filters and env_checks; HandlersError if the reply is unusable.

    `reply` is the answer's text, None when the model answered without any."""
    where = f"handler {index} ({handler.label!r})"
    fix = "rerun compile-handlers --llm, or write input_filters/env_checks by hand"
    if reply is None:
        raise HandlersError(f"the hook model's answer for {where} has no text", file=source, fix=fix)
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HandlersError(f"the hook model's answer for {where} is not JSON ({exc.msg}): {reply[:120]!r}",
                            file=source, fix=fix) from None
    if not isinstance(data, dict) or set(data) - {"input_filters", "env_checks"}:
        raise HandlersError(
            f"the hook model's answer for {where} is not an object with only input_filters and env_checks: "
            f"{reply[:120]!r}",
            file=source, fix=fix,
        )
    filters = data.get("input_filters") or []
    checks = data.get("env_checks") or {}
    if not isinstance(filters, list) or not all(isinstance(f, str) and f for f in filters):
        raise HandlersError(f"the hook model's input_filters for {where} is not a list of strings: {filters!r}",
                            file=source, fix=fix)
    for pattern in filters:
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise HandlersError(f"the hook model's input_filters for {where} has an invalid regex {pattern!r}: {exc}",
                                file=source, fix=fix) from None
    env_checks: dict[str, EnvCheck] = {}
    if not isinstance(checks, dict):
        raise HandlersError(f"the hook model's env_checks for {where} is not a mapping: {checks!r}",
                            file=source, fix=fix)
    for name, check in checks.items():
        substrings = check.get("must_contain") if isinstance(check, dict) and set(check) <= {"must_contain"} else None
        if not name or not isinstance(substrings, list) or not all(isinstance(s, str) for s in substrings):
            raise HandlersError(
                f"the hook model's env_checks.{name} for {where} is not {{must_contain: [strings]}}: {check!r}",
                file=source, fix=fix,
            )
        env_checks[name] = EnvCheck(must_contain=[s.lower() for s in substrings])
    return handler.model_copy(update={"input_filters": filters, "env_checks": env_checks})


def refine_handlers(
    handlers: ToolHandlers,
    *,
    environ: Mapping[str, str],
    source: str = "compile-handlers --llm",
    retry: RetryPolicy | None = None,
) -> ToolHandlers:
    """Ask `handlers.hook_model` for each gating handler's checks; all or nothing."""
    import anthropic  # here, not at the top: see model_api.py
    client = client_from_env(environ, timeout_s=REQUEST_TIMEOUT_S)
    if not (client.api_key or client.auth_token):
        raise HandlersError(
            "no credentials for the hook model",
            file=source,
            fix="export ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), and ANTHROPIC_BASE_URL for another endpoint",
        )
    refined: list[Handler] = []
    try:
        for index, handler in enumerate(handlers.handlers):
            if not needs_refinement(handler):
                refined.append(handler)
                continue
            request: dict[str, Any] = {
                "model": handlers.hook_model,
                "max_tokens": MAX_TOKENS,
                "system": SYSTEM_PROMPT,
                "extra_body": GREEDY,
                "messages": [{"role": "user", "content": handler_request(handler)}],
            }
            try:
                message = create_message(
                    client, request, deadline=time.monotonic() + REQUEST_TIMEOUT_S, retry=retry or ANSWER_RETRY
                )
                reply = first_text(message)
            except (anthropic.AnthropicError, ValueError) as exc:
                raise HandlersError(
                    f"asking the hook model {handlers.hook_model!r} ({client.base_url}) about handler {index} "
                    f"({handler.label!r}) failed: {type(exc).__name__}: {exc}",
                    file=source,
                    fix="check ANTHROPIC_BASE_URL and the credentials, or write the checks by hand",
                ) from exc
            refined.append(parse_refinement(reply, handler, index, source))
    finally:
        client.close()
    return handlers.model_copy(update={"handlers": refined})
