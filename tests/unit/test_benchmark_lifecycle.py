"""The lifecycle benchmark's arithmetic: the background comes off every layer, round by round."""

from __future__ import annotations

import pytest

from benchmarks.lifecycle import BARE, LAYERS, NOTHING, layer_costs


def test_each_round_s_background_comes_off_before_the_median() -> None:
    rounds = [{NOTHING: 0.02, BARE: 0.52, "+ its lifeline": 0.72},
              {NOTHING: 0.10, BARE: 0.60, "+ its lifeline": 0.90},
              {NOTHING: 0.04, BARE: 0.59, "+ its lifeline": 0.79}]
    costs = {c.name: c for c in layer_costs(rounds, each=5)}
    assert set(costs) == {BARE, "+ its lifeline"}
    assert costs[BARE].rounds == pytest.approx((0.10, 0.10, 0.11))
    assert costs[BARE].cost_s == pytest.approx(0.10)
    # The median of each round's own difference, not the difference of two medians (0.79 - 0.04 over 5).
    assert costs["+ its lifeline"].rounds == pytest.approx((0.14, 0.16, 0.15))
    assert costs["+ its lifeline"].cost_s == pytest.approx(0.15)
    assert costs["+ its lifeline"].over(costs[BARE]) == pytest.approx(1.5)


def test_the_layers_keep_their_order_and_the_floor_is_one_of_them() -> None:
    rounds = [{NOTHING: 0.0, **{name: float(index + 1) for index, name in enumerate(LAYERS)}}]
    assert [c.name for c in layer_costs(rounds, each=1)] == list(LAYERS)
    assert BARE in LAYERS
