"""What a baseline comparison produces: `comparison.json` in the run under test's directory.

Run A is the run under test, run B its baseline, as in the reference's
pairwise comparison (`run_a`, `run_b`, `wins_a`: the run beat its baseline).
Every delta is A − B. The shapes are pydantic models, validated when a report
reads the file back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Winner = Literal["A", "B", "tie", "error", "not_run"]
Preference = Literal["A", "B", "tie"]
JudgeVerdict = Literal["regressed", "improved", "no significant change", "not compared"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RunRef(_Model):
    run_id: str
    root: str
    eval: str = ""


class CaseValues(_Model):
    """One case's value for one judge in each run, as compared (a never-ran case counts as failing)."""

    case: str
    a: float | bool | None = None
    b: float | bool | None = None


class JudgeComparison(_Model):
    """One judge across the two runs: each run's aggregate (a judge error counted as failing) and the paired test."""

    judge_type: str = ""
    metric: Literal["pass_rate", "mean"] | None = None
    a: float | None = None
    b: float | None = None
    delta: float | None = None  # a - b
    in_a: bool = True
    in_b: bool = True
    # The paired comparison over the cases both runs have a value for (compare/stats.py).
    n: int = 0
    mean_delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    exact: bool = True
    test: str | None = None
    better: int = 0
    worse: int = 0
    same: int = 0
    not_run_a: int = 0
    not_run_b: int = 0
    incomplete_a: int = 0
    incomplete_b: int = 0
    # The judge errored on the case (e.g. on an output it could not parse): counted as failing, like never-ran.
    errored_a: int = 0
    errored_b: int = 0
    unpaired: dict[str, str] = Field(default_factory=dict)  # case -> why it is not in the paired test
    degraded: bool = False  # the reference's rule: the aggregate dropped by more than the tolerance
    significant: bool = False  # p < alpha
    verdict: JudgeVerdict = "not compared"
    changed: list[CaseValues] = Field(default_factory=list)  # cases whose value differs, for the report

    def regression_line(self, name: str, tolerance: float, alpha: float) -> str:
        """`[judge] pass_rate_vs_baseline: 1.0 -> 0.3333   why`, as the reference prints a baseline regression."""
        metric = self.metric or "mean"

        def show(value: float | None) -> str:
            return "n/a" if value is None else str(round(value, 4))

        why = []
        if self.degraded:
            why.append(f"Degraded vs baseline (dropped by more than {tolerance:g})")
        if self.significant and (self.mean_delta or 0) < 0:
            why.append(f"significantly worse (p={self.p_value:.3g} < {alpha:g}, {self.worse} of {self.n} cases worse)")
        return f"[{name}] {metric}_vs_baseline: {show(self.b)} -> {show(self.a)}   {'; '.join(why)}"


class PairwiseCase(_Model):
    """One case judged A/B twice, the outputs swapped the second time (`pref_ab`: the run shown first)."""

    case_id: str
    winner: Winner
    reasoning: str = ""
    pref_ab: Preference | None = None
    pref_ba: Preference | None = None
    reasoning_ab: str | None = None
    reasoning_ba: str | None = None
    error: str | None = None
    incomplete: bool = False


class PairwiseSummary(_Model):
    """The reference's `pairwise` block: wins, ties and errors of the run (A) against its baseline (B).

    `win_rate` is wins_a over every case compared — ties, judge errors and cases
    that never ran included: none of them is a win.
    """

    run_a: str
    run_b: str
    judge: str = "pairwise"
    model: str | None = None
    cases_compared: int = 0
    wins_a: int = 0
    wins_b: int = 0
    ties: int = 0
    errors: int = 0
    not_run: int = 0
    win_rate: float | None = None
    per_case: list[PairwiseCase] = Field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class Comparison(_Model):
    run_a: RunRef  # the run under test
    run_b: RunRef  # the baseline
    compared_at: str = ""
    alpha: float = 0.05
    tolerance: float = 0.5
    confidence: float = 0.95
    paired_cases: int = 0
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(default_factory=list)
    judges: dict[str, JudgeComparison] = Field(default_factory=dict)
    pairwise: PairwiseSummary | None = None
    warnings: list[str] = Field(default_factory=list)

    @property
    def regressed(self) -> list[str]:
        return [name for name, judge in self.judges.items() if judge.verdict == "regressed"]

    def regression_lines(self) -> list[str]:
        return [self.judges[name].regression_line(name, self.tolerance, self.alpha) for name in self.regressed]

    def to_data(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"pairwise"})
        data["pairwise"] = self.pairwise.to_data() if self.pairwise is not None else None
        data["regressions"] = self.regression_lines()
        return data
