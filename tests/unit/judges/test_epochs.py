"""Epochs: pass@k and pass^k against values worked out by hand, and the aggregation across epochs."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.judges.epochs import aggregate, judge_lines, pass_at_k, pass_hat_k
from agent_eval_sandbox.rundir.layout import epoch_case_id, split_epoch


@pytest.mark.parametrize(("n", "c", "k", "at", "hat"), [
    (5, 0, 1, 0.0, 0.0),
    (5, 5, 3, 1.0, 1.0),
    (5, 2, 1, 0.4, 0.4),  # k=1: both are the pass rate
    (5, 2, 2, 0.7, 0.1),  # 1 - C(3,2)/C(5,2) = 1 - 3/10; C(2,2)/C(5,2) = 1/10
    (4, 3, 2, 1.0, 0.5),  # C(1,2)=0; C(3,2)/C(4,2) = 3/6
    (10, 3, 5, 1 - 21 / 252, 0.0),  # C(7,5)=21, C(10,5)=252; c < k: no k draws all pass
])
def test_pass_at_k_and_pass_hat_k(n: int, c: int, k: int, at: float, hat: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at)
    assert pass_hat_k(n, c, k) == pytest.approx(hat)


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 4)


def test_epoch_ids_round_trip() -> None:
    assert split_epoch(epoch_case_id("001-a#b", 12)) == ("001-a#b", 12)
    assert split_epoch("plain") == ("plain", None)
    assert split_epoch("x#0") == ("x#0", None)
    assert split_epoch("#3") == ("#3", None)


def _v(value: object, status: str = "scored") -> dict[str, object]:
    return {"value": value, "status": status}


def test_aggregate_counts_a_never_ran_epoch_as_not_passed() -> None:
    per_case = {
        "a#1": {"ok": _v(True), "score": _v(4)},
        "a#2": {"ok": _v(False), "score": _v(2)},
        "a#3": {"ok": _v(None, "not_run"), "score": _v(None, "not_run")},
        "b#1": {"ok": _v(True), "score": _v(5)},
        "b#2": {"ok": _v(True), "score": _v(5)},
        "b#3": {"ok": _v(True), "score": _v(5)},
    }
    result = aggregate(per_case, 3)
    a_ok = result["a"]["ok"]
    assert a_ok["passed"] == 1 and a_ok["scored"] == 2 and a_ok["mean"] == pytest.approx(0.5)
    assert a_ok["pass@1"] == pytest.approx(1 / 3) and a_ok["pass@3"] == 1.0 and a_ok["pass^2"] == 0.0
    assert result["b"]["ok"]["pass^3"] == 1.0
    assert result["a"]["score"] == {"epochs": 3, "scored": 2, "mean": 3.0}  # numeric: no pass@k
    lines = judge_lines(result, 3)
    assert "  ok: pass@3=1.000 pass^3=0.500 over 2 case(s) x 3 epochs" in lines
    assert "  score: mean=4.000 over 2 case(s) x 3 epochs" in lines
