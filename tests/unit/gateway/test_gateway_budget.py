"""The reservation rule (pure): what a request reserves, when max_tokens is lowered, when it is refused."""

import threading

import pytest

from agent_eval_sandbox.gateway.budget import (
    CONTEXT_CEILING_TOKENS,
    MIN_OUTPUT_TOKENS,
    WorstRates,
    admit,
    input_token_bound,
    limited_body,
    worst_case_usd,
)
from agent_eval_sandbox.gateway.ledger import Ledger
from agent_eval_sandbox.gateway.pricing import MOST_EXPENSIVE, price_for

SONNET = price_for("claude-sonnet-4-6").price  # $3 in, $15 out, 1h cache write $6 per MTok
# The shape of CLI 2.1.332's first request: 32,000 max_tokens, thinking just below, ~88 KB.
CLI_BODY = {"model": "claude-sonnet-4-6", "max_tokens": 32000,
            "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "updates"}}
CLI_BYTES = 87_375


def _admit(body, body_bytes, remaining, price=SONNET, ceiling=128_000):
    return admit(body, body_bytes, price, remaining_usd=remaining, max_tokens_ceiling=ceiling, budget_usd=remaining)


def test_the_input_bound_is_the_body_at_three_bytes_a_token_up_to_a_context_window():
    assert input_token_bound(CLI_BYTES) == 29_125  # the real request was ~20k tokens
    assert input_token_bound(1) == 1
    assert input_token_bound(32 * 1024 * 1024) == CONTEXT_CEILING_TOKENS


def test_the_worst_rates_are_the_highest_input_side_rate_and_the_output_rate():
    assert WorstRates.of(SONNET, 30_000) == WorstRates(pytest.approx(6e-6), pytest.approx(15e-6))
    # A model billed at other rates past a prompt length: the higher of both sets, once the
    # prompt could be that long.
    haiku_55 = price_for("claude-haiku-5-5").price
    assert WorstRates.of(haiku_55, 100_001) == WorstRates(pytest.approx(1e-6), pytest.approx(2.5e-6))
    assert WorstRates.of(haiku_55, 100_000) == WorstRates(pytest.approx(0.2e-6), pytest.approx(0.5e-6))
    sonnet_45 = price_for("claude-sonnet-4-5").price
    assert WorstRates.of(sonnet_45, 29_125) == WorstRates(pytest.approx(6e-6), pytest.approx(15e-6))
    assert WorstRates.of(sonnet_45, 200_001) == WorstRates(pytest.approx(12e-6), pytest.approx(22.5e-6))
    # The most expensive known price: Opus 4.0's $75 output, $30 1-hour cache write per MTok.
    assert worst_case_usd(3000, 1000, MOST_EXPENSIVE) == pytest.approx(1000 * 30e-6 + 1000 * 75e-6)


def test_a_request_that_fits_reserves_its_worst_case_unchanged():
    admission = _admit(CLI_BODY, CLI_BYTES, remaining=5.0)
    assert admission.allowed and admission.lowered_from is None and admission.thinking_budget is None
    assert admission.max_tokens == 32000
    assert admission.reserve_usd == pytest.approx(29_125 * 6e-6 + 32000 * 15e-6)  # $0.65


def test_max_tokens_is_lowered_to_what_is_left_and_thinking_below_it():
    admission = _admit(CLI_BODY, CLI_BYTES, remaining=0.5)
    input_usd = 29_125 * 6e-6
    assert admission.allowed and admission.lowered_from == 32000
    assert admission.max_tokens == int((0.5 - input_usd) / 15e-6)  # 21,416
    assert admission.thinking_budget == admission.max_tokens - 1
    assert admission.reserve_usd <= 0.5
    body = limited_body(CLI_BODY, admission)
    assert body["max_tokens"] == admission.max_tokens
    assert body["thinking"] == {"type": "enabled", "budget_tokens": admission.max_tokens - 1, "display": "updates"}
    assert CLI_BODY["max_tokens"] == 32000  # the original is left alone


def test_a_thinking_budget_already_below_the_new_max_tokens_is_kept():
    body = {**CLI_BODY, "thinking": {"type": "enabled", "budget_tokens": 2000}}
    admission = _admit(body, CLI_BYTES, remaining=0.5)
    assert admission.lowered_from == 32000 and admission.thinking_budget is None
    assert limited_body(body, admission)["thinking"]["budget_tokens"] == 2000


def test_too_little_left_is_a_refusal_that_says_what_is_left_and_needed():
    input_usd = 29_125 * 6e-6
    enough = input_usd + MIN_OUTPUT_TOKENS * 15e-6
    plain = {"model": "claude-sonnet-4-6", "max_tokens": 32000}
    assert _admit(plain, CLI_BYTES, remaining=enough + 1e-9).max_tokens == MIN_OUTPUT_TOKENS
    refused = _admit(plain, CLI_BYTES, remaining=enough - 1e-6)
    assert not refused.allowed and refused.reserve_usd == 0
    assert "budget exhausted" in refused.refusal and f"${enough - 1e-6:.4f} left" in refused.refusal
    assert "29125 input tokens" in refused.refusal
    # With thinking on, max_tokens must also leave room for the API's minimum thinking budget below it.
    assert _admit(CLI_BODY, CLI_BYTES, remaining=input_usd + 1025.5 * 15e-6).thinking_budget == 1024
    assert not _admit(CLI_BODY, CLI_BYTES, remaining=input_usd + 1024.5 * 15e-6).allowed


@pytest.mark.parametrize("remaining", [0.0, -0.3])
def test_nothing_left_refuses_even_a_tiny_request(remaining):
    assert not _admit({"model": "claude-haiku-4-5", "max_tokens": 1}, 10, remaining=remaining).allowed


def test_a_small_max_tokens_that_fits_is_not_subject_to_the_floor():
    admission = _admit({"model": "claude-sonnet-4-6", "max_tokens": 10}, 100, remaining=0.001)
    assert admission.allowed and admission.max_tokens == 10 and admission.lowered_from is None


def test_the_ceiling_lowers_max_tokens_whatever_the_budget():
    body = {"model": "claude-sonnet-4-6", "max_tokens": 10_000_000,
            "thinking": {"type": "enabled", "budget_tokens": 9_000_000}}
    admission = _admit(body, 1000, remaining=1000.0, ceiling=64_000)
    assert admission.max_tokens == 64_000 and admission.lowered_from == 10_000_000
    assert admission.thinking_budget == 63_999


def test_an_unknown_model_reserves_at_the_top_price():
    body = {"model": "claude-next-9", "max_tokens": 1000}
    admission = admit(body, 300, MOST_EXPENSIVE, remaining_usd=1.0, max_tokens_ceiling=128_000, budget_usd=1.0)
    assert admission.reserve_usd == pytest.approx(100 * 30e-6 + 1000 * 75e-6)


def test_requests_admitted_at_once_never_reserve_more_than_the_budget():
    """Eight threads admit at the same moment: their reservations together stay within the budget."""
    ledger = Ledger(0.5)
    body = {"model": "claude-sonnet-4-6", "max_tokens": 20000}
    barrier, results = threading.Barrier(8), []

    def one() -> None:
        barrier.wait()
        results.append(ledger.admit(body, 30_000, SONNET, max_tokens_ceiling=128_000))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    admitted = [reservation for _, reservation in results if reservation is not None]
    assert 1 <= len(admitted) <= 2 and sum(r.amount_usd for r in admitted) <= 0.5
    assert ledger.reserved_usd == pytest.approx(sum(r.amount_usd for r in admitted))
    for reservation in admitted:  # each answer costs at most what it reserved
        ledger.settle(reservation, reservation.amount_usd / 2)
        ledger.settle(reservation, 99.0)  # a second settle of the same reservation is ignored
    assert ledger.reserved_usd == 0 and ledger.spent_usd <= 0.25


def test_a_plain_reservation_fits_or_is_refused_whole():
    ledger = Ledger(0.01)
    first = ledger.reserve(0.006)
    assert first is not None and ledger.reserve(0.006) is None
    ledger.settle(first, 0.001)
    assert ledger.reserve(0.009) is not None and ledger.spent_usd == pytest.approx(0.001)
    with pytest.raises(ValueError):
        Ledger(-1)


def test_a_steps_cap_bounds_what_it_spends_within_the_cases_budget():
    ledger = Ledger(1.0)
    first = ledger.reserve(0.3)
    assert first is not None
    ledger.settle(first, 0.3)
    ledger.cap_next(0.2)  # the next step may spend 0.2 of the 0.7 left
    assert ledger.reserve(0.25) is None
    held = ledger.reserve(0.2)
    assert held is not None and ledger.left_usd == pytest.approx(0.5)
    ledger.settle(held, 0.2)
    ledger.cap_next(5.0)  # a cap above the case's budget is the budget
    assert ledger.reserve(0.51) is None and ledger.reserve(0.5) is not None
    body = {"model": "claude-sonnet-4-6", "max_tokens": 20000}
    capped = Ledger(10.0)
    capped.cap_next(0.0)
    admission, reservation = capped.admit(body, 3000, SONNET, max_tokens_ceiling=128_000)
    assert reservation is None and "max_budget_usd $0.0000" in (admission.refusal or "")
