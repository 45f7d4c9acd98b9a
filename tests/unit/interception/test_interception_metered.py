"""Hook-model calls paid from the case's budget: reserve first, then charge what the call cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import pytest

from agent_eval_sandbox.gateway.ledger import Ledger, Reservation
from agent_eval_sandbox.gateway.usage import Usage
from agent_eval_sandbox.interception.answerer import (
    BudgetExhausted,
    MeteredAnswerer,
    ModelReply,
)
from agent_eval_sandbox.interception.decision import AnswerRequest, Option

REQUEST = AnswerRequest("Which priority?", (Option("High"), Option("Normal")), "Prefer Normal.", "title: x\n",
                        "claude-haiku-4-5")


@dataclass
class Meter:
    """A case's channel as the answerer sees it: a ledger, and the calls it charged."""

    ledger: Ledger
    charged: list[dict[str, Any]] = field(default_factory=list)

    def reserve_usd(self, amount_usd: float) -> Reservation | None:
        return self.ledger.reserve(amount_usd)

    def charge_call(self, reservation: Reservation, *, model: str, usage: Usage | None, at_least_usd: float = 0.0,
                    error: str | None = None) -> float:
        cost = max(at_least_usd, (usage.input_tokens * 1 + usage.output_tokens * 5) / 1e6 if usage else 0.0)
        self.ledger.settle(reservation, cost)
        self.charged.append({"model": model, "usage": usage, "cost": cost, "reserved": reservation.amount_usd,
                             "error": error})
        return cost


class Answerer:
    def __init__(self, outcome: ModelReply | BaseException) -> None:
        self.outcome = outcome
        self.calls = 0

    def reply(self, request: AnswerRequest, timeout_s: float) -> ModelReply:
        self.calls += 1
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def test_an_answer_is_charged_its_usage_within_its_reservation():
    meter = Meter(Ledger(1.0))
    answerer = Answerer(ModelReply("Normal", "claude-haiku-4-5-20251001", Usage(input_tokens=150, output_tokens=2)))
    assert MeteredAnswerer(answerer, meter)(REQUEST, 10) == "Normal"
    (charge,) = meter.charged
    assert charge["model"] == "claude-haiku-4-5-20251001" and charge["cost"] == pytest.approx(160e-6)
    # The reservation: the prompt's size at 3 bytes a token at $2 (1-hour cache write), 256 tokens at $5.
    assert 256 * 5e-6 < charge["reserved"] < 256 * 5e-6 + 0.002
    assert meter.ledger.reserved_usd == 0 and meter.ledger.spent_usd == pytest.approx(160e-6)


def test_a_budget_that_cannot_cover_a_call_makes_no_call():
    meter, answerer = Meter(Ledger(0.001)), Answerer(ModelReply("Normal", "m", None))
    with pytest.raises(BudgetExhausted, match="cannot cover a hook-model call"):
        MeteredAnswerer(answerer, meter)(REQUEST, 10)
    assert answerer.calls == 0 and meter.charged == []


def test_an_error_answer_costs_nothing_a_lost_call_its_reservation():
    response = httpx.Response(400, request=httpx.Request("POST", "http://hook-model/v1/messages"))
    meter = Meter(Ledger(1.0))
    with pytest.raises(anthropic.BadRequestError):
        MeteredAnswerer(Answerer(anthropic.BadRequestError("no", response=response, body=None)), meter)(REQUEST, 10)
    with pytest.raises(TimeoutError):
        MeteredAnswerer(Answerer(TimeoutError("slow")), meter)(REQUEST, 10)
    refused, lost = meter.charged
    assert refused["cost"] == 0 and refused["error"] == "BadRequestError"
    assert lost["cost"] == lost["reserved"] > 0 and "may have run" in lost["error"]
    assert meter.ledger.reserved_usd == 0


def test_an_answer_without_text_is_charged_then_falls_back():
    meter = Meter(Ledger(1.0))
    answerer = Answerer(ModelReply(None, "claude-haiku-4-5", Usage(input_tokens=100, output_tokens=20)))
    with pytest.raises(ValueError, match="without text"):
        MeteredAnswerer(answerer, meter)(REQUEST, 10)
    assert meter.charged[0]["cost"] == pytest.approx(200e-6)
