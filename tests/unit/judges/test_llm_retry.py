"""Which model-call failures are retried."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from agent_eval_sandbox.judges.llm import is_transient

REQUEST = httpx.Request("POST", "http://judge.test/v1/messages")


def _status(code: int) -> anthropic.APIStatusError:
    return anthropic.APIStatusError("failed", response=httpx.Response(code, request=REQUEST), body=None)


@pytest.mark.parametrize("code", [408, 409, 429, 500, 502, 503, 529])
def test_rate_limits_timeouts_and_server_errors_are_retried(code: int) -> None:
    assert is_transient(_status(code))


@pytest.mark.parametrize("code", [400, 401, 403, 404, 413, 422])
def test_client_errors_are_not(code: int) -> None:
    assert not is_transient(_status(code))


def test_connection_failures_are_retried_other_errors_are_not() -> None:
    assert is_transient(anthropic.APIConnectionError(request=REQUEST))
    assert is_transient(anthropic.APITimeoutError(request=REQUEST))
    assert not is_transient(ValueError("x"))
