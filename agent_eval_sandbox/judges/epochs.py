"""`run --epochs N`: each case runs N times, as the cases `<id>#1` … `<id>#N` (rundir/layout.epoch_case_id),
and each judge is aggregated across a case's epochs (pure).

Per judge and case: the mean of its numeric values (booleans count 1/0), and, for a boolean judge,
pass@k (the chance that at least one of k epochs drawn from the n passes) and pass^k (that all k
pass), by the unbiased estimators over the n epochs with c passes:
pass@k = 1 - C(n-c, k)/C(n, k), pass^k = C(c, k)/C(n, k). An epoch that never ran or whose judge
erred counts as not passed (the never-ran rule holds per epoch) and is left out of the mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import comb
from typing import Any

from agent_eval_sandbox.rundir.layout import split_epoch


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return comb(c, k) / comb(n, k)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return None


def aggregate(per_case: Mapping[str, Mapping[str, Mapping[str, Any]]], epochs: int) -> dict[str, Any]:
    """{case: {judge: {epochs, scored, mean, passed?, pass@k…, pass^k…}}} from summary.yaml's per_case
    (keyed by epoch case ids), k = 1..epochs."""
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for epoch_id, verdicts in per_case.items():
        case_id, _ = split_epoch(epoch_id)
        for judge, verdict in verdicts.items():
            grouped.setdefault(case_id, {}).setdefault(judge, []).append(verdict)
    result: dict[str, Any] = {}
    for case_id, judges in grouped.items():
        for judge, given in judges.items():
            values = [v.get("value") if v.get("status") == "scored" else None for v in given]
            numbers = [x for x in (_number(v) for v in values) if x is not None]
            entry: dict[str, Any] = {"epochs": epochs, "scored": len(numbers),
                                     "mean": sum(numbers) / len(numbers) if numbers else None}
            if all(isinstance(v, bool) or v is None for v in values) and any(isinstance(v, bool) for v in values):
                passed = sum(1 for v in values if v is True)
                entry["passed"] = passed
                for k in range(1, epochs + 1):
                    entry[f"pass@{k}"] = round(pass_at_k(epochs, passed, k), 6)
                    entry[f"pass^{k}"] = round(pass_hat_k(epochs, passed, k), 6)
            result.setdefault(case_id, {})[judge] = entry
    return result


def judge_lines(aggregated: Mapping[str, Mapping[str, Mapping[str, Any]]], epochs: int) -> list[str]:
    """One line per judge: its pass@N and pass^N averaged over the cases, or its mean."""
    by_judge: dict[str, list[Mapping[str, Any]]] = {}
    for judges in aggregated.values():
        for judge, entry in judges.items():
            by_judge.setdefault(judge, []).append(entry)
    lines = []
    for judge, entries in by_judge.items():
        at = [e[f"pass@{epochs}"] for e in entries if f"pass@{epochs}" in e]
        hat = [e[f"pass^{epochs}"] for e in entries if f"pass^{epochs}" in e]
        means = [e["mean"] for e in entries if e["mean"] is not None]
        if at:
            lines.append(f"  {judge}: pass@{epochs}={sum(at) / len(at):.3f} pass^{epochs}={sum(hat) / len(hat):.3f} "
                         f"over {len(entries)} case(s) x {epochs} epochs")
        elif means:
            lines.append(f"  {judge}: mean={sum(means) / len(means):.3f} over {len(entries)} case(s) x {epochs} epochs")
    return lines
