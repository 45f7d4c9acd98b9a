"""A case's share of the controller's CPU (cpu_share.py, pure: the clock is a list)."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.cpu_share import CpuShare


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_burst_goes_at_once_then_the_debt_is_paid_at_the_rate():
    clock = Clock()
    share = CpuShare(rate=0.25, burst_s=2.0, clock=clock)
    assert share.wait_s() == 0
    share.charge(1.5)
    assert share.wait_s() == 0  # 0.5 left
    share.charge(1.5)  # one request may overdraw: it was let in with the bucket not empty
    assert share.wait_s() == pytest.approx(1.0 / 0.25)
    clock.now += 2.0
    assert share.wait_s() == pytest.approx(0.5 / 0.25)
    clock.now += 2.0
    assert share.wait_s() == 0
    assert share.charged_s == 3.0


def test_idle_time_refills_no_more_than_the_burst():
    clock = Clock()
    share = CpuShare(rate=0.25, burst_s=2.0, clock=clock)
    clock.now += 3600
    share.charge(2.0)
    assert share.wait_s() == 0
    share.charge(0.25)
    assert share.wait_s() == pytest.approx(1.0)


def test_over_any_stretch_a_busy_case_gets_the_burst_plus_the_rate():
    clock = Clock()
    share = CpuShare(rate=0.25, burst_s=2.0, clock=clock)
    got, cost = 0.0, 0.7  # requests costing 0.7 s each, sent as fast as they are let in
    while clock.now < 160.0:
        wait = share.wait_s()
        if wait:
            clock.now += wait
            continue
        share.charge(cost)
        got += cost
    assert got <= 2.0 + 0.25 * 60.0 + cost


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (1, -1)])
def test_a_share_needs_a_rate_and_a_burst(rate, burst):
    with pytest.raises(ValueError, match="positive rate"):
        CpuShare(rate=rate, burst_s=burst)
