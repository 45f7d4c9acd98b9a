"""The comparison's statistics against values computed by hand or published tables."""

from __future__ import annotations

import math

import pytest

from agent_eval_sandbox.compare import stats
from agent_eval_sandbox.compare.stats import paired_stats, sign_flip_test, t_cdf, t_interval, t_quantile


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 4, 2.7764), (0.975, 9, 2.2622),
    (0.975, 29, 2.0452), (0.95, 10, 1.8125), (0.995, 5, 4.0321),
])
def test_t_quantiles_match_the_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


def test_t_cdf_is_symmetric_and_half_at_zero():
    assert t_cdf(0.0, 7) == pytest.approx(0.5)
    assert t_cdf(1.3, 7) + t_cdf(-1.3, 7) == pytest.approx(1.0)
    # df = 1 is the Cauchy distribution: P(T <= 1) = 3/4
    assert t_cdf(1.0, 1) == pytest.approx(0.75)


def test_t_interval_known_values():
    # mean 2, sd 1 (1, 2, 3), n 3: 2 ± 4.3027 / sqrt(3)
    low, high = t_interval([1.0, 2.0, 3.0])
    half = 4.302653 / math.sqrt(3)
    assert (low, high) == (pytest.approx(2 - half, abs=1e-5), pytest.approx(2 + half, abs=1e-5))
    assert t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert t_interval([1.0]) is None


def test_sign_flip_exact_values():
    # (-1, -1, 0): sums over the 4 sign patterns of the two nonzero steps are -2, 0, 0, 2; |S| >= 2 in 2 of 4.
    assert sign_flip_test([-1, -1, 0]).p_value == pytest.approx(0.5)
    # Six cases all worse by one: only the two extreme patterns of 64 are as far from zero.
    assert sign_flip_test([-1] * 6).p_value == pytest.approx(2 / 64)
    # Pass/fail differences: the exact McNemar test, 8 discordant pairs all one way: 2 * 0.5^8.
    assert sign_flip_test([1] * 8 + [0] * 5).p_value == pytest.approx(2 / 256)
    # Unequal sizes: (0.5, 1.0, -0.25): observed 1.25; patterns with |sum| >= 1.25 are (+,+,±) and (−,−,±): 4/8
    assert sign_flip_test([0.5, 1.0, -0.25]).p_value == pytest.approx(0.5)
    assert sign_flip_test([0.0, 0.0]).p_value == 1.0
    assert sign_flip_test([0.1 + 0.2, -0.3]).p_value == 1.0  # the float noise cancels


def test_sign_flip_falls_back_to_a_seeded_monte_carlo(monkeypatch):
    monkeypatch.setattr(stats, "MAX_STATES", 8)
    diffs = [0.11, 0.23, 0.37, 0.41, 0.53, 0.67, -0.05]
    first, second = sign_flip_test(diffs), sign_flip_test(diffs)
    assert not first.exact and first == second
    monkeypatch.setattr(stats, "MAX_STATES", 200_000)
    exact = sign_flip_test(diffs)
    assert exact.exact and first.p_value == pytest.approx(exact.p_value, abs=0.02)


def test_paired_stats_counts_and_no_test_without_pairs():
    found = paired_stats([1.0, -1.0, 0.0, 2.0])
    assert (found.n, found.better, found.worse, found.same) == (4, 2, 1, 1)
    assert found.mean_delta == pytest.approx(0.5)
    assert found.ci_low < 0.5 < found.ci_high
    empty = paired_stats([])
    assert empty.n == 0 and empty.p_value is None and empty.mean_delta is None
    single = paired_stats([-1.0])
    assert single.ci_low is None and single.p_value == 1.0
