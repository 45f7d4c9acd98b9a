"""A case's money: its budget, what it spent, and what the requests in flight reserved.

Thread-safe: every handler thread of a channel (and the hook broker's answerer)
reserves and settles here. A reservation is taken whole or not at all, under
the same lock that reads what is left, so requests sent at once cannot all
see the same remainder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_eval_sandbox.gateway.budget import Admission, admit
from agent_eval_sandbox.gateway.pricing import ModelPrice


@dataclass(eq=False)
class Reservation:
    """Money held for one call until its cost is known; settled exactly once."""

    amount_usd: float
    settled: bool = False


class Ledger:
    def __init__(self, budget_usd: float) -> None:
        if budget_usd < 0:
            raise ValueError(f"budget_usd must be >= 0, not {budget_usd}")
        self.budget_usd = budget_usd
        self._lock = threading.Lock()
        self._spent_usd = 0.0
        self._open: set[Reservation] = set()
        # A pipeline's step spends under a cap of its own as well: a ceiling on the case's total.
        self._ceiling_usd: float | None = None
        self._cap_usd: float | None = None

    def _limit(self) -> float:
        return self.budget_usd if self._ceiling_usd is None else min(self.budget_usd, self._ceiling_usd)

    def _remaining(self) -> float:
        return self._limit() - self._spent_usd - sum(r.amount_usd for r in self._open)

    def cap_next(self, cap_usd: float | None) -> None:
        """From now on spend at most `cap_usd` more (within the budget); None lifts the cap."""
        with self._lock:
            self._cap_usd = cap_usd
            self._ceiling_usd = None if cap_usd is None else self._spent_usd + cap_usd

    @property
    def left_usd(self) -> float:
        """What the whole budget still allows, before any step's cap."""
        with self._lock:
            return self.budget_usd - self._spent_usd - sum(r.amount_usd for r in self._open)

    def admit(self, body: Mapping[str, Any], body_bytes: int, price: ModelPrice,
              *, max_tokens_ceiling: int) -> tuple[Admission, Reservation | None]:
        """A Messages request's admission and, if it is allowed, its reservation."""
        with self._lock:
            admission = admit(body, body_bytes, price, remaining_usd=self._remaining(),
                              max_tokens_ceiling=max_tokens_ceiling,
                              budget_usd=self.budget_usd if self._cap_usd is None else min(self.budget_usd,
                                                                                           self._cap_usd))
            if not admission.allowed:
                return admission, None
            reservation = Reservation(admission.reserve_usd)
            self._open.add(reservation)
        return admission, reservation

    def reserve(self, amount_usd: float) -> Reservation | None:
        """Hold `amount_usd` if it fits in what is left; None if it does not."""
        with self._lock:
            if amount_usd > self._remaining():
                return None
            reservation = Reservation(amount_usd)
            self._open.add(reservation)
        return reservation

    def settle(self, reservation: Reservation | None, cost_usd: float) -> None:
        """Replace a reservation (if any) by what the call cost; a second settle of it does nothing."""
        with self._lock:
            if reservation is not None:
                if reservation.settled:
                    return
                reservation.settled = True
                self._open.discard(reservation)
            self._spent_usd += cost_usd

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent_usd

    @property
    def reserved_usd(self) -> float:
        with self._lock:
            return sum(r.amount_usd for r in self._open)
