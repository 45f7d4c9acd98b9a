"""The hook model, through the anthropic SDK: tier 2 of AskUserQuestion answering.

The host's environment gives the base URL and credentials (offline: the
scripted model server), so the case files sent as context never pass through
the container. The SDK's own retries are off; tenacity retries transient
failures within the caller's time budget. Requests ask for temperature 0, as
the reference does; a model that rejects `temperature` (newer models accept
only the default) gets the request once more without it.

The questions come from the sandbox (a forged event on the broker's socket is
as good as the CLI's), and the calls are paid with the host's credentials:
`MeteredAnswerer` makes each one reserve its worst case against the case's
budget first and charges what it cost, through the case's gateway channel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from agent_eval_sandbox.gateway.budget import worst_case_usd
from agent_eval_sandbox.gateway.ledger import Reservation
from agent_eval_sandbox.gateway.pricing import price_for
from agent_eval_sandbox.gateway.usage import Usage, usage_from_api
from agent_eval_sandbox.interception.decision import AnswerRequest
from agent_eval_sandbox.model_api import RetryPolicy, is_transient

if TYPE_CHECKING:
    import anthropic

MAX_TOKENS = 256
# The SDK has no sampling parameters any more; the reference asks for temperature 0.
GREEDY = {"temperature": 0}


# A question blocks the agent: retry briefly.
ANSWER_RETRY = RetryPolicy(attempts=3, initial_wait_s=0.5, max_wait_s=5.0)


def rejects_temperature(exc: BaseException) -> bool:
    import anthropic  # here, not at the top: see model_api.py
    return isinstance(exc, anthropic.BadRequestError) and "temperature" in str(exc).lower()


def client_from_env(environ: Mapping[str, str], *, timeout_s: float) -> anthropic.Anthropic:
    """An SDK client for the host's endpoint and credentials (`ANTHROPIC_BASE_URL`, key or token)."""
    import anthropic  # here, not at the top: see model_api.py
    return anthropic.Anthropic(
        base_url=environ.get("ANTHROPIC_BASE_URL") or None,
        api_key=environ.get("ANTHROPIC_API_KEY") or None,
        auth_token=environ.get("ANTHROPIC_AUTH_TOKEN") or None,
        max_retries=0,
        timeout=timeout_s,
    )


def first_text(message: Any) -> str | None:
    for block in getattr(message, "content", None) or []:
        if getattr(block, "type", None) == "text":
            return str(block.text)
    return None


@dataclass(frozen=True)
class ModelReply:
    text: str | None  # None: the model answered without text
    model: str
    usage: Usage | None


def reply_of(message: Any, asked: str) -> ModelReply:
    raw_usage = getattr(message, "usage", None)
    usage: Usage | None = None
    if raw_usage is not None and hasattr(raw_usage, "model_dump"):
        usage = usage_from_api(raw_usage.model_dump())
    model = getattr(message, "model", None)
    return ModelReply(first_text(message), model if isinstance(model, str) and model else asked, usage)


def create_message(
    client: anthropic.Anthropic,
    request: dict[str, Any],
    *,
    deadline: float,
    retry: RetryPolicy,
) -> Any:
    """messages.create with transient retries until `deadline` (monotonic seconds)."""
    import anthropic  # here, not at the top: see model_api.py
    retrying = Retrying(
        stop=stop_after_attempt(retry.attempts) | stop_after_delay(max(deadline - time.monotonic(), 0.0)),
        wait=wait_exponential(multiplier=retry.initial_wait_s, max=retry.max_wait_s),
        retry=retry_if_exception(is_transient),
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            timeout = max(deadline - time.monotonic(), 0.1)
            try:
                return client.messages.create(**request, timeout=timeout)
            except anthropic.BadRequestError as exc:
                if "extra_body" not in request or not rejects_temperature(exc):
                    raise
                request = {k: v for k, v in request.items() if k != "extra_body"}
                return client.messages.create(**request, timeout=timeout)
    raise AssertionError("unreachable: tenacity reraises")


def answer_prompt(request: AnswerRequest) -> str:
    """What the hook model is asked: instructions, case context, the question, its options."""
    options = "\n".join(
        f"  {number}. {option.label}: {option.description}" for number, option in enumerate(request.options, 1)
    )
    return (
        "You are answering a question on behalf of the user, during an automated evaluation run.\n\n"
        f"Handler instructions: {request.handler_prompt}\n\n"
        f"Case context:\n{request.case_context}\n\n"
        f"Question: {request.question}\n\n"
        f"Available options:\n{options}\n\n"
        "Based on the handler instructions and the case context, which option should be selected?\n"
        "Reply with ONLY the option label text, nothing else."
    )


class AnthropicAnswerer:
    """Calls the hook model; one SDK client shared by the broker's threads.

    Called as `answerer(request, timeout_s)`; returns the model's raw reply
    (the decision logic resolves it to an option label) or raises.
    """

    def __init__(self, environ: Mapping[str, str], *, retry: RetryPolicy | None = None) -> None:
        self._environ = dict(environ)
        self._retry = retry or ANSWER_RETRY
        self._client: anthropic.Anthropic | None = None
        self._lock = threading.Lock()

    def _get_client(self) -> anthropic.Anthropic:
        with self._lock:
            if self._client is None:
                self._client = client_from_env(self._environ, timeout_s=30.0)
            return self._client

    def reply(self, request: AnswerRequest, timeout_s: float) -> ModelReply:
        """The model's answer with what it cost (usage), text or not."""
        client = self._get_client()
        if not (client.api_key or client.auth_token):
            raise RuntimeError("no credentials for the hook model: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN")
        message = create_message(
            client,
            {
                "model": request.model,
                "max_tokens": MAX_TOKENS,
                "messages": [{"role": "user", "content": answer_prompt(request)}],
                "extra_body": GREEDY,
            },
            deadline=time.monotonic() + timeout_s,
            retry=self._retry,
        )
        return reply_of(message, request.model)

    def __call__(self, request: AnswerRequest, timeout_s: float) -> str:
        return _text(self.reply(request, timeout_s))

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def _text(reply: ModelReply) -> str:
    if reply.text is None:
        raise ValueError("the model answered without text")
    return reply.text


class Meter(Protocol):
    """Where hook-model calls are paid from: the case's gateway channel (`gateway.Channel`)."""

    def reserve_usd(self, amount_usd: float) -> Reservation | None: ...

    def charge_call(self, reservation: Reservation, *, model: str, usage: Usage | None, at_least_usd: float = 0.0,
                    error: str | None = None) -> float: ...


class BudgetExhausted(RuntimeError):
    """What is left of the case's budget cannot cover the call."""


# The JSON around the prompt in the request body (model, max_tokens, message framing).
_REQUEST_OVERHEAD_BYTES = 256


class MeteredAnswerer:
    """The hook model paid from the case's budget: each call reserves its worst case first.

    The worst case is the budget's rule (`gateway.budget`): the request's size
    at 3 bytes a token at the model's highest input rate, plus MAX_TOKENS of
    output. An answer is charged by its usage; an error answer costs nothing; a
    call that timed out or lost its connection may have run upstream and is
    charged its reservation. When the budget cannot cover a call it raises,
    and the decision falls back to its next tier, as on any error.
    """

    def __init__(self, answerer: AnthropicAnswerer, meter: Meter) -> None:
        self._answerer = answerer
        self._meter = meter

    def __call__(self, request: AnswerRequest, timeout_s: float) -> str:
        import anthropic  # here, not at the top: see model_api.py
        size = len(answer_prompt(request).encode()) + _REQUEST_OVERHEAD_BYTES
        worst = worst_case_usd(size, MAX_TOKENS, price_for(request.model).price)
        reservation = self._meter.reserve_usd(worst)
        if reservation is None:
            raise BudgetExhausted(f"the case's budget left cannot cover a hook-model call (up to ${worst:.6f})")
        try:
            reply = self._answerer.reply(request, timeout_s)
        except anthropic.APIStatusError as exc:
            self._meter.charge_call(reservation, model=request.model, usage=None, error=f"{type(exc).__name__}")
            raise
        except BaseException as exc:
            self._meter.charge_call(reservation, model=request.model, usage=None, at_least_usd=worst,
                                    error=f"{type(exc).__name__}: charged the reservation (the call may have run)")
            raise
        self._meter.charge_call(reservation, model=reply.model, usage=reply.usage,
                                at_least_usd=worst if reply.usage is None else 0.0)
        return _text(reply)
