"""LLM judges: one forced-tool Messages API call per sample, through the anthropic SDK.

The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN and ANTHROPIC_BASE_URL,
so the same code talks to the API, the host gateway, or the scripted model
server. The SDK's own retries are off; tenacity retries transient failures
(429, 408, 5xx, connection errors and timeouts) with exponential backoff.
Every outcome is a `Sample`: a failed call is an error sample, never an
exception out of here.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from agent_eval_sandbox.judges.results import Sample
from agent_eval_sandbox.judges.verdict import Scale, read_verdict
from agent_eval_sandbox.model_api import ModelEndpoint, RetryPolicy, is_transient

if TYPE_CHECKING:
    import anthropic

MAX_TOKENS = 4096
REQUEST_TIMEOUT_S = 300.0


def _api_error_text(exc: anthropic.AnthropicError) -> str:
    import anthropic  # here, not at the top: see model_api.py
    if isinstance(exc, anthropic.APIStatusError):
        body: Mapping[str, Any] = exc.body if isinstance(exc.body, Mapping) else {}
        error: Mapping[str, Any] = body["error"] if isinstance(body.get("error"), Mapping) else {}
        detail = error.get("message") or exc.message
        kind = error.get("type") or type(exc).__name__
        return f"HTTP {exc.status_code} {kind}: {detail}"
    return f"{type(exc).__name__}: {exc}"


class ModelJudge:
    """Calls judge models; one client shared by the scoring threads."""

    def __init__(self, retry: RetryPolicy | None = None, *, endpoint: ModelEndpoint | None = None) -> None:
        self._retry = retry or RetryPolicy()
        self._endpoint = endpoint
        self._client: anthropic.Anthropic | None = None
        self._lock = threading.Lock()

    def _get_client(self) -> anthropic.Anthropic:
        import anthropic  # here, not at the top: see model_api.py
        with self._lock:
            if self._client is None:
                endpoint = self._endpoint
                if endpoint is None:
                    self._client = anthropic.Anthropic(max_retries=0, timeout=REQUEST_TIMEOUT_S)
                else:
                    self._client = anthropic.Anthropic(base_url=endpoint.base_url, api_key=endpoint.api_key,
                                                       max_retries=0, timeout=REQUEST_TIMEOUT_S)
            return self._client

    def sample(self, prompt: str, scale: Scale, model: str) -> Sample:
        """One verdict for an already rendered prompt."""
        reply = self.ask(prompt, system=scale.system_prompt(), tool=scale.tool(), model=model)
        if isinstance(reply, str):
            return Sample.failed(reply)
        return read_verdict(reply, scale)

    def ask(self, prompt: str, *, system: str, tool: Mapping[str, Any], model: str) -> Any | str:
        """The judge model's reply (plain data) to `prompt`, forced to call `tool`; a str says why there is none."""
        import anthropic  # here, not at the top: see model_api.py
        client = self._get_client()
        if not (client.api_key or client.auth_token):
            return "no credentials for the judge model: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
        retrying = Retrying(
            stop=stop_after_attempt(self._retry.attempts),
            wait=wait_exponential(multiplier=self._retry.initial_wait_s, max=self._retry.max_wait_s),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )
        request: dict[str, Any] = {
            "model": model,
            "max_tokens": MAX_TOKENS,
            "system": system,
            "tools": [dict(tool)],
            "tool_choice": {"type": "tool", "name": tool["name"]},
            "messages": [{"role": "user", "content": prompt}],
        }
        try:
            for attempt in retrying:
                with attempt:
                    message = client.messages.create(**request)
        except anthropic.AnthropicError as exc:
            attempts = retrying.statistics.get("attempt_number", 1)
            tries = f" after {attempts} attempts" if attempts > 1 else ""
            return f"the judge model call failed{tries}: {_api_error_text(exc)} (model {model}, {client.base_url})"
        return _as_data(message)


def _as_data(message: Any) -> Any:
    """The SDK's message as plain data, so validation sees exactly what the API sent."""
    dump = getattr(message, "model_dump", None)
    return dump(mode="json") if callable(dump) else message
