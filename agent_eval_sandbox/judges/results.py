"""What judging produces: samples, per-case results and per-judge statistics.

These are the shapes stored in summary.yaml/json (the reference's
`per_case.<case>.<judge>` and `judges.<judge>` entries) and read back by
`report`, so they are pydantic models validated at that edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# bool before the numbers: pydantic keeps True a bool, 3 an int, 2.5 a float.
Value = bool | int | float
# not_run: the case's agent never ran (or its results could not be collected): no judge ran, and
# the case counts against every judge (see `aggregate`).
CaseStatus = Literal["scored", "skipped", "error", "not_run"]
JudgeStatus = Literal["OK", "ERROR", "SKIP"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Sample(_Model):
    """One run of a judge on one case: a value, or the reason there is none."""

    value: Value | None = None
    rationale: str = ""
    error: str | None = None
    # Set when the value was rejected by the judge's score_range (printed while scoring).
    off_scale: bool = Field(default=False, exclude=True)

    @classmethod
    def failed(cls, error: str, *, off_scale: bool = False) -> Sample:
        return cls(error=error, off_scale=off_scale)


class Stability(_Model):
    """The spread of a sampled judge's values on one case."""

    samples: int
    error_count: int
    values: list[Value]
    stable: bool
    pass_count: int | None = None  # boolean judges
    min: float | None = None  # numeric judges
    max: float | None = None
    mean: float | None = None


class CaseResult(_Model):
    """One judge's verdict on one case (the reference's per-case entry, plus `status`)."""

    value: Value | None = None
    rationale: str = ""
    judge_type: str
    status: CaseStatus
    error: str | None = None
    stability: Stability | None = None
    sample_rationales: list[Sample] | None = None
    # How the case ended, when not by itself: set on not_run results and on results of a case
    # that ran but was stopped (`incomplete`: judged on what it left).
    end_reason: str | None = None
    incomplete: bool | None = None

    @classmethod
    def scored(cls, judge_type: str, value: Value, rationale: str) -> CaseResult:
        return cls(status="scored", value=value, rationale=rationale, judge_type=judge_type)

    @classmethod
    def skipped(cls, judge_type: str, rationale: str) -> CaseResult:
        return cls(status="skipped", rationale=rationale, judge_type=judge_type)

    @classmethod
    def errored(cls, judge_type: str, error: str) -> CaseResult:
        # The reason doubles as the rationale: that is where the reference points people.
        return cls(status="error", error=error, rationale=error, judge_type=judge_type)

    @classmethod
    def not_run(cls, judge_type: str, end_reason: str, reason: str) -> CaseResult:
        return cls(status="not_run", error=reason, rationale=reason, judge_type=judge_type, end_reason=end_reason)

    def marked_incomplete(self, end_reason: str) -> CaseResult:
        """This result, marked as judged on what a case that did not complete left behind."""
        return self.model_copy(update={"incomplete": True, "end_reason": end_reason})

    @property
    def failing(self) -> bool:
        """Not a pass: a false verdict, an error, or a case that never ran (numbers have no verdict)."""
        return self.status in ("error", "not_run") or self.value is False

    @classmethod
    def from_sample(cls, judge_type: str, sample: Sample) -> CaseResult:
        if sample.error is not None or sample.value is None:
            return cls.errored(judge_type, sample.error or "the judge produced no value")
        return cls.scored(judge_type, sample.value, sample.rationale)

    def to_data(self) -> dict[str, Any]:
        """Plain data for summary.yaml: `value` always present, absent extras left out."""
        data = self.model_dump(mode="json", exclude_none=True)
        return {"value": self.value, **data}


class StabilityStats(_Model):
    samples: int
    stable_cases: int
    total_cases: int


class JudgeStats(_Model):
    """A judge's aggregate over the run (the reference's `judges.<name>` entry)."""

    judge_type: str
    mean: float | None = None
    pass_rate: float | None = None
    # Pairwise comparison is not implemented: always None, so min_win_rate reports n/a.
    win_rate: float | None = None
    error_rate: float | None = None
    scored_cases: int = 0
    errored_cases: int = 0
    skipped_cases: int = 0
    not_run_cases: int = 0  # cases whose agent never ran: they count as failing (see aggregate)
    incomplete_cases: int = 0  # scored cases that ran but did not complete (judged on what they left)
    total_cases: int = 0
    status: JudgeStatus = "SKIP"
    stability: StabilityStats | None = None
    score_range: tuple[float, float] | None = None
    feedback_type: str | None = None

    def to_data(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for key in ("stability", "score_range", "feedback_type"):
            if data[key] is None:
                del data[key]
        return data


@dataclass(frozen=True)
class JudgeMeta:
    """What the statistics and the report need to know about a judge beyond its results."""

    name: str
    judge_type: str
    score_range: tuple[float, float] | None = None
    feedback_type: str | None = None
