"""The host's own calls to Anthropic models (LLM judges, the AskUserQuestion
answerer, `compile-handlers --llm`): how often to try, and which failures are
worth another try. The agent's calls go through the gateway instead.

The anthropic SDK is imported where a call is made, never at a module's top:
its import costs ~1.2 s of CPU, which every command would pay (`validate`, a
run with no LLM judge) though most never call a model from the host
(`tests/unit/test_cli_start.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    import anthropic  # here, not at the top: see the module's doc
    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, anthropic.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False
