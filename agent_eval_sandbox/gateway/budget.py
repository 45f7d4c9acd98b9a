"""What a model request may reserve of a case's budget before it is sent (pure).

Usage is known only once a response is over, so a check of `spent < budget`
at admission lets any number of requests in flight overshoot it. Instead every
Messages request reserves its worst case against what is left (budget − spent
− what the requests in flight reserved) before it goes upstream; its
reservation is replaced by the real charge when the response ends.

Worst case = input side + output side, at the prices of the model the request
names (an unknown model: the most expensive known price).

- Output: `max_tokens` × the output rate. The API never bills more output than
  max_tokens. A request whose max_tokens does not fit is forwarded with
  max_tokens lowered to what does (and `thinking.budget_tokens` below it, as
  the API requires); when fewer than MIN_OUTPUT_TOKENS would fit it is refused.
- Input: counted upstream, after the fact. The bound used is the body's size
  at BYTES_PER_TOKEN bytes a token (at most CONTEXT_CEILING_TOKENS), priced at
  the model's highest input-side rate (a 1-hour cache write). Measured: the
  first request of CLI 2.1.332 is ~88 KB for ~20k tokens (4.4 bytes a token);
  prose, JSON and code take more than 3 bytes a token and base64 images far
  more. It is not a bound for content the API expands: a PDF page is billed
  as its text *and* an image of it, so a small compressed PDF can cost more
  tokens than it has bytes. Such a request can be charged more than it
  reserved, by the difference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_eval_sandbox.gateway.pricing import ModelPrice

BYTES_PER_TOKEN = 3
# The largest context window of the models in pricing.py.
CONTEXT_CEILING_TOKENS = 1_000_000
# Fewer output tokens than this are no use to an agent turn: refuse rather than forward a stub.
MIN_OUTPUT_TOKENS = 1024
# The API's own minimum for `thinking.budget_tokens` (and it must stay below max_tokens).
MIN_THINKING_BUDGET = 1024


@dataclass(frozen=True)
class WorstRates:
    """USD per token: the highest input-side and output rates a request to the model can be billed."""

    input: float
    output: float

    @classmethod
    def of(cls, price: ModelPrice, prompt_tokens: int) -> WorstRates:
        """For a request whose prompt is at most `prompt_tokens`: the long-prompt rates count only
        when the prompt could be that long."""
        long_rates = price.long_prompt_rates
        could_be_long = price.long_prompt_threshold is not None and prompt_tokens > price.long_prompt_threshold
        sets = [price.rates, *([long_rates] if long_rates is not None and could_be_long else [])]
        input_side = max(max(r.input, r.cache_write_5m, r.cache_write_1h, r.cache_read) for r in sets)
        return cls(input_side / 1_000_000, max(r.output for r in sets) / 1_000_000)


def input_token_bound(body_bytes: int) -> int:
    return min(math.ceil(body_bytes / BYTES_PER_TOKEN), CONTEXT_CEILING_TOKENS)


def worst_case_usd(body_bytes: int, max_tokens: int, price: ModelPrice) -> float:
    input_tokens = input_token_bound(body_bytes)
    rates = WorstRates.of(price, input_tokens)
    return input_tokens * rates.input + max_tokens * rates.output


@dataclass(frozen=True)
class Admission:
    """Whether a Messages request may go upstream, what it reserves, and what to change in it."""

    reserve_usd: float = 0.0
    refusal: str | None = None
    max_tokens: int | None = None  # what to forward
    lowered_from: int | None = None  # the request's own max_tokens, when it was lowered
    thinking_budget: int | None = None  # the new thinking.budget_tokens, when that was lowered too

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def _thinking_budget(body: Mapping[str, Any]) -> int | None:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool):
            return budget
    return None


def admit(
    body: Mapping[str, Any],
    body_bytes: int,
    price: ModelPrice,
    *,
    remaining_usd: float,
    max_tokens_ceiling: int,
    budget_usd: float,
) -> Admission:
    """The reservation of one request (its `max_tokens` already checked to be a positive int)."""
    requested: int = body["max_tokens"]
    input_tokens = input_token_bound(body_bytes)
    rates = WorstRates.of(price, input_tokens)
    input_usd = input_tokens * rates.input
    target = min(requested, max_tokens_ceiling)
    affordable = math.floor((remaining_usd - input_usd) / rates.output) if remaining_usd > input_usd else 0
    if target > affordable:
        if affordable < MIN_OUTPUT_TOKENS:
            return Admission(refusal=_exhausted(remaining_usd, budget_usd, input_usd, input_tokens, rates, price))
        target = affordable
    thinking = _thinking_budget(body)
    new_thinking = None
    if target < requested and thinking is not None and thinking >= target:
        new_thinking = target - 1
        if new_thinking < MIN_THINKING_BUDGET:
            return Admission(refusal=_exhausted(remaining_usd, budget_usd, input_usd, input_tokens, rates, price,
                                                thinking=True))
    return Admission(
        reserve_usd=input_usd + target * rates.output,
        max_tokens=target,
        lowered_from=requested if target < requested else None,
        thinking_budget=new_thinking,
    )


def _exhausted(remaining: float, budget: float, input_usd: float, input_tokens: int, rates: WorstRates,
               price: ModelPrice, *, thinking: bool = False) -> str:
    output = MIN_THINKING_BUDGET + 1 if thinking else MIN_OUTPUT_TOKENS
    needs = input_usd + output * rates.output
    return (
        f"model budget exhausted for this case: ${max(remaining, 0.0):.4f} left of max_budget_usd ${budget:.4f} "
        f"(after what was spent and what requests in flight reserved); this request needs up to ${needs:.4f} "
        f"(up to {input_tokens} input tokens and at least {output} output tokens at {price.name} prices); "
        "the model gateway refuses it"
    )


def limited_body(body: Mapping[str, Any], admission: Admission) -> dict[str, Any]:
    """The request to forward: `max_tokens` (and the thinking budget) as the admission lowered them."""
    limited = {**body, "max_tokens": admission.max_tokens}
    if admission.thinking_budget is not None:
        limited["thinking"] = {**body["thinking"], "budget_tokens": admission.thinking_budget}
    return limited
