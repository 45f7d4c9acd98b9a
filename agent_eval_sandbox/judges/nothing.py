"""`NothingToJudge`: how judge code says it had nothing to judge, instead of passing.

Raised by a python judge (the builtins do; a `module:` judge may too), it
makes that case's result an error whose text starts "nothing to judge:" —
counted in the judge's error_rate, never in its pass rate. Standard library
only: it is imported inside the judge worker.
"""

from __future__ import annotations

NOTHING_TO_JUDGE = "nothing to judge"


class NothingToJudge(Exception):  # noqa: N818 - named for what the judge says, not as an error
    """The case holds nothing this judge can rule on (no tool calls, no cost, no expectation)."""

    def describe(self) -> str:
        return f"{NOTHING_TO_JUDGE}: {self}" if str(self) else NOTHING_TO_JUDGE
