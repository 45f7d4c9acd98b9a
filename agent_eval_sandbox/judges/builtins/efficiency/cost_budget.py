"""Passes when the case's billed cost is at or below the budget.

Required fields: cost_usd (traces.metrics), end_reason
Failure means: the case cost more than `max_cost_usd` (default 1.0), or it was
stopped by its budget (`end_reason: budget_exhausted`). No cost recorded is
"nothing to judge" (an error of this judge, not a pass).
"""

from __future__ import annotations

import math
from typing import Any

from agent_eval_sandbox.judges.nothing import NothingToJudge


def judge(outputs: dict[str, Any], max_cost_usd: float = 1.0, **_: Any) -> tuple[bool, str]:
    cost = outputs.get("cost_usd")
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost):
        raise NothingToJudge("no cost was recorded (is traces.metrics off, or did the case crash?)")
    if outputs.get("end_reason") == "budget_exhausted":
        return False, f"The case was stopped by its budget (${cost:.4f} spent)"
    if cost <= max_cost_usd:
        return True, f"Cost ${cost:.4f} is within the budget of ${max_cost_usd:.4f}"
    return False, f"Cost ${cost:.4f} exceeds the budget of ${max_cost_usd:.4f}"
