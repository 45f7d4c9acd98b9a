"""The statistics of a baseline comparison (pure, standard library only).

Two runs are compared case by case: for each judge, the paired differences
d_i = run − baseline over the cases both runs scored. Two numbers describe them:

- a two-sided p-value from the paired **sign-flip permutation test** of the
  mean difference: under "no difference" each d_i is as likely to be +|d_i|
  as −|d_i|, and the p-value is the share of the 2^n sign patterns whose sum
  is at least as far from 0 as the observed one. It is exact (enumerated
  through the distribution of the sum, not the 2^n patterns); for pass/fail
  judges (d_i in {−1, 0, 1}) it is exactly the exact McNemar test. Past
  `MAX_STATES` distinct partial sums (many cases with unrelated fractional
  scores) it is estimated from `MONTE_CARLO_DRAWS` random sign patterns with a
  fixed seed, so a comparison always gives the same p-value.
- a confidence interval for the mean difference: the Student-t interval
  (mean ± t·s/√n, n − 1 degrees of freedom). It needs n ≥ 2; with every
  difference equal it is that single point.

Why these: judge values are small discrete scales or pass/fail, and an eval
has few cases, so a test that assumes nothing about their distribution and is
exact at small n is the honest one; the t interval is the usual way to state
the size of a mean difference and is what readers expect next to it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

MAX_STATES = 200_000
MONTE_CARLO_DRAWS = 20_000
_SEED = 20240611
# Differences are compared on this grid, so 0.1 + 0.2 and 0.3 are the same sum.
_QUANTUM = 1e-9


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
                          -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    # The fraction converges fast on this side of the mean; use the symmetry on the other.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection on `t_cdf`; 0 < p < 1)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


def t_interval(diffs: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """The Student-t confidence interval of the mean of `diffs`; None with fewer than two."""
    n = len(diffs)
    if n < 2:
        return None
    mean = math.fsum(diffs) / n
    variance = math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)
    if variance <= 0.0:
        return mean, mean
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * math.sqrt(variance / n)
    return mean - half, mean + half


def _exact_sign_flip(steps: Sequence[int], observed: int) -> float | None:
    """P(|S| >= |observed|) for S = sum of ±step, by the distribution of S; None past MAX_STATES."""
    counts: dict[int, int] = {0: 1}
    for step in steps:
        if step == 0:
            continue
        grown: dict[int, int] = {}
        for total, ways in counts.items():
            for moved in (total + step, total - step):
                grown[moved] = grown.get(moved, 0) + ways
        if len(grown) > MAX_STATES:
            return None
        counts = grown
    extreme = sum(ways for total, ways in counts.items() if abs(total) >= abs(observed))
    return extreme / sum(counts.values())


def _sampled_sign_flip(steps: Sequence[int], observed: int) -> float:
    rng = random.Random(_SEED)
    hits = 0
    for _ in range(MONTE_CARLO_DRAWS):
        total = sum(step if rng.random() < 0.5 else -step for step in steps)
        hits += abs(total) >= abs(observed)
    # The observed pattern is one of the possible ones: never report a p-value of 0.
    return (hits + 1) / (MONTE_CARLO_DRAWS + 1)


@dataclass(frozen=True)
class SignFlip:
    p_value: float
    exact: bool


def sign_flip_test(diffs: Sequence[float]) -> SignFlip:
    """The two-sided paired sign-flip permutation test of mean(diffs) = 0."""
    steps = [round(d / _QUANTUM) for d in diffs]
    observed = sum(steps)
    if observed == 0:
        return SignFlip(1.0, True)
    exact = _exact_sign_flip(steps, observed)
    if exact is not None:
        return SignFlip(min(1.0, exact), True)
    return SignFlip(min(1.0, _sampled_sign_flip(steps, observed)), False)


@dataclass(frozen=True)
class PairedStats:
    """What the comparison reports of one judge's paired differences (run − baseline)."""

    n: int
    mean_delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    exact: bool
    better: int  # cases where the run scored higher than the baseline
    worse: int
    same: int


def paired_stats(diffs: Sequence[float], confidence: float = 0.95) -> PairedStats:
    """The mean difference, its t interval and the sign-flip p-value; no test without a pair."""
    n = len(diffs)
    better = sum(1 for d in diffs if d > _QUANTUM)
    worse = sum(1 for d in diffs if d < -_QUANTUM)
    if n == 0:
        return PairedStats(0, None, None, None, None, True, 0, 0, 0)
    interval = t_interval(diffs, confidence)
    test = sign_flip_test(diffs)
    return PairedStats(
        n=n,
        mean_delta=math.fsum(diffs) / n,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        p_value=test.p_value,
        exact=test.exact,
        better=better,
        worse=worse,
        same=n - better - worse,
    )
