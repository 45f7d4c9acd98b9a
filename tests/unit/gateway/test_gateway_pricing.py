import pytest

from agent_eval_sandbox.gateway.pricing import (
    MOST_EXPENSIVE,
    PRICES,
    canonical_model,
    cost_usd,
    price_for,
)
from agent_eval_sandbox.gateway.usage import Usage, usage_from_api


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4-1"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-5-20251101", "claude-opus-5"),
        ("claude-opus-5-5", "claude-opus-5-5"),
        ("claude-fable-5-1", "claude-fable-5-1"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-3-5-haiku@20241022", "claude-3-5-haiku"),
        ("claude-3-5-sonnet-latest", "claude-sonnet-4-6"),
    ],
)
def test_known_models_and_their_snapshot_spellings(model, name):
    lookup = price_for(model)
    assert lookup.known and lookup.price.name == name and lookup.note(model) is None


@pytest.mark.parametrize("model", ["gpt-4o", "claude-fable-5-2", "claude-opus-4-9", "claude-mythos-preview", "", None])
def test_unknown_models_cost_the_most_and_say_so(model):
    lookup = price_for(model)
    assert not lookup.known and lookup.price == MOST_EXPENSIVE
    assert "most expensive" in lookup.note(model)
    assert all(MOST_EXPENSIVE.rates.output >= p.rates.output for p in PRICES)
    assert all(MOST_EXPENSIVE.rates.input >= p.rates.input for p in PRICES)


def test_canonical_model():
    assert canonical_model("anthropic.claude-3-5-sonnet-20241022-v2:0") == "claude-3-5-sonnet"
    assert canonical_model("Claude-Sonnet-4-5") == "claude-sonnet-4-5"


def test_cost_of_plain_tokens():
    sonnet = price_for("claude-sonnet-4-6").price
    # The CLI itself reported $0.00006 for these 5 in + 3 out tokens.
    assert cost_usd(Usage(input_tokens=5, output_tokens=3), sonnet) == pytest.approx(0.00006)
    assert cost_usd(Usage(input_tokens=1_000_000, output_tokens=1_000_000), sonnet) == pytest.approx(18.0)


def test_cache_tokens_use_the_models_cache_rates():
    sonnet = price_for("claude-sonnet-4-6").price
    usage = Usage(
        cache_creation_input_tokens=1_000_000, cache_creation_1h_input_tokens=400_000, cache_read_input_tokens=1_000_000
    )
    # 600k x $3.75 + 400k x $6 + 1M x $0.30
    assert cost_usd(usage, sonnet) == pytest.approx(2.25 + 2.4 + 0.3)
    # Sonnet 5.5 cache hits are 0.05x input, not the standard 0.1x.
    assert cost_usd(Usage(cache_read_input_tokens=1_000_000), price_for("claude-sonnet-5-5").price) == pytest.approx(
        0.10
    )


def test_a_long_prompt_moves_haiku_5_5_to_its_higher_rates():
    haiku = price_for("claude-haiku-5-5").price
    assert cost_usd(Usage(input_tokens=100_000, output_tokens=1_000_000), haiku) == pytest.approx(0.01 + 0.5)
    long = Usage(input_tokens=60_000, cache_read_input_tokens=50_000, output_tokens=1_000_000)
    assert cost_usd(long, haiku) == pytest.approx(0.03 + 0.0025 + 2.5)


def test_usage_adds_up():
    total = Usage(input_tokens=1, output_tokens=2) + Usage(input_tokens=10, cache_read_input_tokens=3)
    assert total == Usage(input_tokens=11, output_tokens=2, cache_read_input_tokens=3)


def test_stream_usage_is_start_overridden_by_delta():
    start = usage_from_api({"input_tokens": 100, "output_tokens": 1, "cache_read_input_tokens": 50})
    final = usage_from_api({"output_tokens": 42, "input_tokens": None}, base=start)
    assert final == Usage(input_tokens=100, output_tokens=42, cache_read_input_tokens=50)


def test_usage_from_api_ignores_garbage_and_reads_cache_breakdown():
    usage = usage_from_api(
        {
            "input_tokens": "7",
            "output_tokens": True,
            "cache_creation_input_tokens": 10,
            "cache_creation": {"ephemeral_1h_input_tokens": 99},
            "server_tool_use": {"web_search_requests": 1},
        }
    )
    assert usage == Usage(cache_creation_input_tokens=10, cache_creation_1h_input_tokens=10)
    assert usage_from_api(None) == Usage()


def test_long_context_prompts_are_billed_at_the_long_context_rates():
    """Found by the red team: a 300k-token prompt to Sonnet 4.5 was charged at the base price."""
    long = Usage(input_tokens=300_000, output_tokens=10_000)
    assert cost_usd(long, price_for("claude-sonnet-4-5").price) == pytest.approx(300_000 * 6 / 1e6 + 10_000 * 22.5 / 1e6)
    short = Usage(input_tokens=150_000, output_tokens=10_000)
    assert cost_usd(short, price_for("claude-sonnet-4-5").price) == pytest.approx(150_000 * 3 / 1e6 + 10_000 * 15 / 1e6)
    assert cost_usd(long, price_for("claude-sonnet-4-6").price) == pytest.approx(300_000 * 3 / 1e6 + 10_000 * 15 / 1e6)
