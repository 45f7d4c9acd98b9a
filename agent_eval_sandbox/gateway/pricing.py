"""What a response costs, from its usage and the model's list price.

Prices are Anthropic's published list prices in USD per million tokens
(platform.claude.com pricing page, as of 2026-11). Cache rates are listed per
model because their ratio to the input price differs between models.
A model not in the table is charged at the most expensive price here: a
budget must never be under-counted because a model is newer than this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_eval_sandbox.gateway.usage import Usage


@dataclass(frozen=True)
class Rates:
    """USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float

    @classmethod
    def standard(cls, input: float, output: float) -> Rates:
        """Rates with Anthropic's standard cache multipliers (1.25x, 2x, 0.1x of input)."""
        return cls(input, output, input * 1.25, input * 2.0, input * 0.1)


@dataclass(frozen=True)
class ModelPrice:
    models: tuple[str, ...]
    rates: Rates
    # Some models bill a whole request at other rates once its prompt (input
    # plus cache reads and writes) is longer than a threshold.
    long_prompt_threshold: int | None = None
    long_prompt_rates: Rates | None = None

    @property
    def name(self) -> str:
        return self.models[0]

    def rates_for(self, usage: Usage) -> Rates:
        prompt = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        if self.long_prompt_threshold is not None and self.long_prompt_rates and prompt > self.long_prompt_threshold:
            return self.long_prompt_rates
        return self.rates


_OPUS_4_5_TO_5 = Rates.standard(5.0, 25.0)
_OPUS_4_0 = Rates.standard(15.0, 75.0)
_SONNET_3_TO_4 = Rates.standard(3.0, 15.0)

PRICES: tuple[ModelPrice, ...] = (
    ModelPrice(("claude-fable-5-1", "claude-mythos-5-1"), Rates(10.0, 50.0, 12.5, 20.0, 0.25)),
    ModelPrice(("claude-fable-5", "claude-mythos-5"), Rates.standard(10.0, 50.0)),
    ModelPrice(("claude-opus-5-5",), Rates(4.0, 20.0, 5.0, 8.0, 0.20)),
    ModelPrice(
        ("claude-opus-5", "claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6", "claude-opus-4-5"), _OPUS_4_5_TO_5
    ),
    ModelPrice(("claude-opus-4-1", "claude-opus-4", "claude-opus-4-0", "claude-3-opus"), _OPUS_4_0),
    ModelPrice(("claude-sonnet-5-5",), Rates(2.0, 10.0, 2.5, 4.0, 0.10)),
    ModelPrice(("claude-sonnet-5",), Rates.standard(2.0, 10.0)),
    ModelPrice(("claude-sonnet-4-6", "claude-3-7-sonnet", "claude-3-5-sonnet"), _SONNET_3_TO_4),
    # With the 1M-context beta, a prompt over 200k tokens is billed at the long-context rates.
    ModelPrice(
        ("claude-sonnet-4-5", "claude-sonnet-4", "claude-sonnet-4-0"),
        _SONNET_3_TO_4,
        long_prompt_threshold=200_000,
        long_prompt_rates=Rates(6.0, 22.5, 7.5, 12.0, 0.6),
    ),
    ModelPrice(
        ("claude-haiku-5-5",),
        Rates(0.10, 0.50, 0.125, 0.20, 0.01),
        long_prompt_threshold=100_000,
        long_prompt_rates=Rates(0.50, 2.50, 0.625, 1.00, 0.05),
    ),
    ModelPrice(("claude-haiku-4-5",), Rates.standard(1.0, 5.0)),
    ModelPrice(("claude-3-5-haiku",), Rates.standard(0.8, 4.0)),
    ModelPrice(("claude-3-haiku",), Rates.standard(0.25, 1.25)),
)
_BY_MODEL = {model: price for price in PRICES for model in price.models}
MOST_EXPENSIVE = max(PRICES, key=lambda p: (p.rates.output, p.rates.input))

# Snapshot dates, `-latest`, Bedrock versions and the 1M-context marker name
# the same model: `claude-haiku-4-5-20251001-v1:0`, `claude-3-5-haiku@20241022`,
# `claude-sonnet-4-5[1m]`.
_SUFFIXES = re.compile(r"(\[1m\])?(-v\d+(:\d+)?)?(-\d{8}|@\d{8}|-latest)?(-v\d+(:\d+)?)?(\[1m\])?$")


def canonical_model(model: str) -> str:
    """The table's name for a model id: from `claude-` on, without snapshot suffixes."""
    start = model.find("claude-")
    name = model[start:] if start >= 0 else model
    return _SUFFIXES.sub("", name.lower())


@dataclass(frozen=True)
class PriceLookup:
    price: ModelPrice
    known: bool

    def note(self, model: str | None) -> str | None:
        """What the log says when the price was a guess."""
        if self.known:
            return None
        rates = self.price.rates
        return (
            f"unknown model {model!r}: charged at the most expensive known price "
            f"({self.price.name}: ${rates.input:g}/${rates.output:g} per MTok in/out)"
        )


def price_for(model: str | None) -> PriceLookup:
    price = _BY_MODEL.get(canonical_model(model)) if model else None
    return PriceLookup(price, known=True) if price else PriceLookup(MOST_EXPENSIVE, known=False)


def cost_usd(usage: Usage, price: ModelPrice) -> float:
    rates = price.rates_for(usage)
    cache_5m = usage.cache_creation_input_tokens - usage.cache_creation_1h_input_tokens
    return (
        usage.input_tokens * rates.input
        + usage.output_tokens * rates.output
        + cache_5m * rates.cache_write_5m
        + usage.cache_creation_1h_input_tokens * rates.cache_write_1h
        + usage.cache_read_input_tokens * rates.cache_read
    ) / 1_000_000
