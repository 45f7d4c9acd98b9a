"""Token usage as the Messages API reports it.

Used both ways: parsed from upstream responses (the gateway's accounting) and
written into scripted responses (so budgets can be tested offline).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, model_validator


class Usage(BaseModel):
    """Tokens of one response, or a sum of responses."""

    # extra="forbid" because scripts are written by hand: a typo must not be
    # silently ignored and leave a budget test charging nothing.
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_creation_input_tokens: NonNegativeInt = 0
    cache_read_input_tokens: NonNegativeInt = 0
    # The part of cache_creation_input_tokens written to the 1-hour cache,
    # which is billed higher than the default 5-minute cache.
    cache_creation_1h_input_tokens: NonNegativeInt = 0

    @model_validator(mode="after")
    def _one_hour_part_of_total(self) -> Usage:
        if self.cache_creation_1h_input_tokens > self.cache_creation_input_tokens:
            raise ValueError(
                "cache_creation_1h_input_tokens is a part of cache_creation_input_tokens: it cannot be larger"
            )
        return self

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})

    def to_api(self) -> dict[str, Any]:
        """The `usage` object of a Messages API response."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_input_tokens - self.cache_creation_1h_input_tokens,
                "ephemeral_1h_input_tokens": self.cache_creation_1h_input_tokens,
            },
        }


def _count(value: Any) -> int | None:
    # bool is an int subclass; a `true` token count is garbage, not 1.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def usage_from_api(raw: Any, base: Usage | None = None) -> Usage:
    """Read an API `usage` object; a field it lacks or nulls keeps `base`'s value.

    In a stream, message_start carries the input side and message_delta the
    *cumulative* counts, so the final usage is start overridden by delta — not
    their sum.
    """
    fields = (base or Usage()).model_dump()
    if not isinstance(raw, Mapping):
        return Usage(**fields)
    for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = _count(raw.get(name))
        if value is not None:
            fields[name] = value
    breakdown = raw.get("cache_creation")
    if isinstance(breakdown, Mapping):
        value = _count(breakdown.get("ephemeral_1h_input_tokens"))
        if value is not None:
            fields["cache_creation_1h_input_tokens"] = value
    fields["cache_creation_1h_input_tokens"] = min(
        fields["cache_creation_1h_input_tokens"], fields["cache_creation_input_tokens"]
    )
    return Usage(**fields)
