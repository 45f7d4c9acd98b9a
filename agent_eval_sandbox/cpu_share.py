"""A case's share of the controller's CPU for the requests it sends the host (pure; the clock is injected).

The model gateway and the hook broker read, parse, check and log every request a
case's sandbox sends them, on the controller's CPU: outside the sandbox's own CPU
limit. A case that sent requests costly to parse (tens of MB of tiny JSON objects)
had a core of the controller work for it and slowed its neighbours 2.3-3.4 times,
one past its deadline (found by a red team). So each case's service charges the CPU
its requests take against a bucket refilled at `rate` CPU-seconds a second, up to
`burst`; a request that finds the bucket in debt waits, before its body is read,
until it is not. Real requests cost far less than the rate: the CLI's 4 MB request
parses in ~10 ms.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# A quarter of a core, sustained, with two CPU-seconds of burst.
RATE = 0.25
BURST_S = 2.0
# A debt this small is paid: what the rate refills over a wait is a float, a hair short of the debt.
_PAID_S = 1e-6


class CpuShare:
    def __init__(self, rate: float = RATE, burst_s: float = BURST_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst_s < 0:
            raise ValueError("a CPU share needs a positive rate and a burst of at least 0")
        self.rate, self.burst_s = rate, burst_s
        self._clock = clock
        self._balance = burst_s
        self._at = clock()
        self._lock = threading.Lock()
        self.charged_s = 0.0  # all CPU charged so far
        self.waited_s = 0.0  # all time requests were held back so far

    def _refill(self) -> None:
        now = self._clock()
        self._balance = min(self.burst_s, self._balance + (now - self._at) * self.rate)
        self._at = now

    def wait_s(self) -> float:
        """How long the next request must wait for the debt to be paid (0: it may go now)."""
        with self._lock:
            self._refill()
            return 0.0 if self._balance >= -_PAID_S else -self._balance / self.rate

    def charge(self, cpu_s: float) -> None:
        with self._lock:
            self._refill()
            self._balance -= max(cpu_s, 0.0)
            self.charged_s += max(cpu_s, 0.0)

    def waited(self, seconds: float) -> None:
        with self._lock:
            self.waited_s += seconds
