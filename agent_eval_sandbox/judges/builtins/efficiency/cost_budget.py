"""Passes when the case's billed cost is at or below the budget.

Required fields: cost_usd (traces.metrics)
Failure means: the run cost more than `max_cost_usd` (default 1.0), or no cost was recorded.
"""

from __future__ import annotations

import math
from typing import Any


def judge(outputs: dict[str, Any], max_cost_usd: float = 1.0, **_: Any) -> tuple[bool, str]:
    cost = outputs.get("cost_usd")
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost):
        return False, "No cost data available (is traces.metrics off, or did the case crash?)"
    if cost <= max_cost_usd:
        return True, f"Cost ${cost:.4f} is within the budget of ${max_cost_usd:.4f}"
    return False, f"Cost ${cost:.4f} exceeds the budget of ${max_cost_usd:.4f}"
