"""The host's own calls to Anthropic models (LLM judges, the AskUserQuestion
answerer, `compile-handlers --llm`): how often to try, and which failures are
worth another try. The agent's calls go through the gateway instead."""

from __future__ import annotations

from dataclasses import dataclass, field

import anthropic


@dataclass(frozen=True)
class ModelEndpoint:
    """Where the host's calls go when not the SDK's environment (an offline run's scripted server)."""

    base_url: str
    api_key: str = field(repr=False)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    initial_wait_s: float = 1.0
    max_wait_s: float = 30.0


def is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts, overload, server errors and broken connections."""
    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False
