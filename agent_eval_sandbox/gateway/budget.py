"""The budget decision: may a case send one more model request?"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BudgetDecision:
    allowed: bool
    reason: str | None = None


def decide(spent_usd: float, budget_usd: float) -> BudgetDecision:
    """Allow while something is left; `budget_usd == 0` allows nothing.

    Checked before each request: usage is only known once a response is
    over, so the request that crosses the line completes and the next is
    refused (a case can overshoot by at most the responses in flight).
    """
    if spent_usd < budget_usd:
        return BudgetDecision(allowed=True)
    return BudgetDecision(
        allowed=False,
        reason=(
            f"model budget exhausted for this case: spent ${spent_usd:.4f} of "
            f"max_budget_usd ${budget_usd:.4f}; the model gateway refuses further requests"
        ),
    )
