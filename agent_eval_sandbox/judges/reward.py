"""The per-case reward: a case's judge results folded into one number in [0, 1] (pure).

As the reference's reward API composes it (README "Reward"):

- a judge's value becomes a contribution in [0, 1] by the first rule that
  applies: a bool is 1.0 / 0.0; a judge in `raw` (or the single `judge`
  without `normalize`) is clamped as is; otherwise it is mapped from the
  judge's own `score_range`, else the deprecated `reward.score_range`, else
  [1, 5], and clamped;
- `gate` (on by default in formula mode, off in judge mode, always on in the
  default composition) makes any boolean judge that returned false zero the
  reward;
- `judge:` that judge's contribution (no value: 0.0); `formula: weighted`
  Σ w·c / Σ w over the weighted judges that have a value; an expression is
  computed over every judge that has a value (judges/formula.py; a name with
  no value or a division by zero gives 0.0 with the reason); the default
  (no keys in the block) averages the numeric judges' contributions, and
  without any is 0.0 when a judge errored, else 1.0.

A judge has no value on a case where it was skipped, errored or never ran.
A case that never ran (issue 13: never-ran is never a pass) gets 0.0, the
reward the reference gives a failed case, and says so; no judge ran on it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_eval_sandbox.config.models import RewardConfig
from agent_eval_sandbox.judges.formula import FormulaError, evaluate_formula
from agent_eval_sandbox.judges.results import CaseResult, JudgeMeta, Value

DEFAULT_RANGE = (1.0, 5.0)
HISTOGRAM_BINS = 10
RewardMode = Literal["judge", "weighted", "expression", "default"]
NEVER_RAN_NOTE = "the case never ran: no judge ran, and a case that never ran gets the reward of a failure"


def reward_mode(config: RewardConfig) -> RewardMode:
    """The block's mode; a block with no keys (`reward: {}`) is the default composition."""
    return "default" if not config.model_fields_set else config.mode


def gates(config: RewardConfig) -> bool:
    return True if reward_mode(config) == "default" else config.gates


def clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def judge_value(result: CaseResult | None) -> Value | None:
    """The judge's value on the case; None when it was skipped, errored or never ran."""
    if result is None or str(result.status) != "scored":
        return None
    return result.value


def normalized(value: Value, score_range: tuple[float, float] | None, fallback: tuple[float, float] | None) -> float:
    """A numeric value mapped to [0, 1] from its judge's scale (else the fallback, else [1, 5]), clamped."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    low, high = score_range or fallback or DEFAULT_RANGE
    return clamp((float(value) - low) / (high - low)) if high > low else 0.0


class CaseReward(BaseModel):
    """One case's reward and, when it is not simply composed, why."""

    reward: float
    note: str | None = None
    not_run: bool = False

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True) | {"reward": self.reward}


class _Composer:
    def __init__(self, config: RewardConfig, metas: Mapping[str, JudgeMeta]) -> None:
        self.config = config
        self.mode = reward_mode(config)
        self.metas = metas
        self.fallback = (float(config.score_range[0]), float(config.score_range[1])) if config.score_range else None

    def contribution(self, name: str, value: Value) -> float:
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        as_is = name in self.config.raw or (self.mode == "judge" and not self.config.normalize)
        if as_is:
            return clamp(float(value))
        meta = self.metas.get(name)
        return normalized(value, meta.score_range if meta else None, self.fallback if self.mode != "default" else None)

    def compose(self, results: Mapping[str, CaseResult]) -> CaseReward:
        values = {name: judge_value(result) for name, result in results.items()}
        if gates(self.config):
            failed = [name for name, value in values.items() if value is False]
            if failed:
                return CaseReward(reward=0.0, note=f"gated: boolean judge {', '.join(repr(n) for n in failed)} "
                                                   "returned false")
        present = {name: value for name, value in values.items() if value is not None}
        if self.mode == "judge":
            return self._single(present)
        if self.mode == "weighted":
            return self._weighted(present)
        if self.mode == "expression":
            return self._expression(present)
        return self._default(present, results)

    def _single(self, present: Mapping[str, Value]) -> CaseReward:
        name = self.config.judge or ""
        if name not in present:
            return CaseReward(reward=0.0, note=f"judge {name!r} has no value (skipped, errored or did not run)")
        return CaseReward(reward=self.contribution(name, present[name]))

    def _weighted(self, present: Mapping[str, Value]) -> CaseReward:
        used = {name: weight for name, weight in self.config.weights.items() if name in present}
        total = math.fsum(used.values())
        if total <= 0:
            return CaseReward(reward=0.0, note="no weighted judge has a value (or every weight is 0)")
        reward = math.fsum(w * self.contribution(n, present[n]) for n, w in used.items()) / total
        dropped = [name for name in self.config.weights if name not in present]
        note = f"no value, left out of the weights: {', '.join(dropped)}" if dropped else None
        return CaseReward(reward=clamp(reward), note=note)

    def _expression(self, present: Mapping[str, Value]) -> CaseReward:
        names = {name: self.contribution(name, value) for name, value in present.items()}
        try:
            return CaseReward(reward=clamp(evaluate_formula(self.config.formula or "", names)))
        except FormulaError as exc:
            return CaseReward(reward=0.0, note=f"the formula failed: {exc}")

    def _default(self, present: Mapping[str, Value], results: Mapping[str, CaseResult]) -> CaseReward:
        numbers = [self.contribution(n, v) for n, v in present.items() if not isinstance(v, bool)]
        if numbers:
            return CaseReward(reward=statistics.fmean(numbers))
        errored = [name for name, result in results.items() if str(result.status) in ("error", "not_run")]
        if errored:
            return CaseReward(reward=0.0, note=f"nothing scored: {', '.join(errored)} errored")
        return CaseReward(reward=1.0)


def compose_reward(config: RewardConfig, metas: Mapping[str, JudgeMeta], results: Mapping[str, CaseResult],
                   *, never_ran: bool = False) -> CaseReward:
    """One case's reward from its judges' results."""
    if never_ran:
        return CaseReward(reward=0.0, note=NEVER_RAN_NOTE, not_run=True)
    return _Composer(config, metas).compose(results)


def reward_record(reward: CaseReward, results: Mapping[str, CaseResult]) -> dict[str, float]:
    """`cases/<id>/reward.json`, as the reference's Harbor verifier writes it: `reward`, then each
    judge's value as a number (a bool as 1.0 / 0.0; a judge without a value left out)."""
    record = {"reward": reward.reward}
    for name, result in results.items():
        value = judge_value(result)
        if value is not None and name not in record:
            record[name] = float(value)
    return record


class RewardSummary(BaseModel):
    """`reward:` of the summary: how the reward was composed, each case's, and their distribution."""

    mode: RewardMode
    gate: bool
    config: dict[str, Any] = Field(default_factory=dict)  # the eval's block, to compose it again
    per_case: dict[str, CaseReward] = Field(default_factory=dict)
    cases: int = 0
    not_run: int = 0
    noted: int = 0  # cases whose reward came with a note (gated, a judge without value, a failed formula)
    mean: float | None = None
    median: float | None = None
    stdev: float | None = None
    min: float | None = None
    max: float | None = None
    histogram: list[int] = Field(default_factory=list)  # HISTOGRAM_BINS counts over [0, 1]

    def to_data(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"per_case"})
        data["per_case"] = {case: reward.to_data() for case, reward in self.per_case.items()}
        return data

    def reward_config(self) -> RewardConfig:
        return RewardConfig.model_validate(self.config)


def histogram(rewards: Collection[float], bins: int = HISTOGRAM_BINS) -> list[int]:
    counts = [0] * bins
    for reward in rewards:
        counts[min(bins - 1, int(reward * bins))] += 1
    return counts


def summarize_rewards(config: RewardConfig, metas: Mapping[str, JudgeMeta],
                      per_case: Mapping[str, Mapping[str, CaseResult]], never_ran: Collection[str]) -> RewardSummary:
    """Every case's reward and the run's mean and distribution."""
    rewards = {case: compose_reward(config, metas, results, never_ran=case in never_ran)
               for case, results in per_case.items()}
    values = [r.reward for r in rewards.values()]
    return RewardSummary(
        mode=reward_mode(config),
        gate=gates(config),
        config=config.model_dump(mode="json", exclude_unset=True),
        per_case=rewards,
        cases=len(values),
        not_run=sum(1 for r in rewards.values() if r.not_run),
        noted=sum(1 for r in rewards.values() if r.note and not r.not_run),
        mean=statistics.fmean(values) if values else None,
        median=statistics.median(values) if values else None,
        stdev=statistics.pstdev(values) if values else None,
        min=min(values) if values else None,
        max=max(values) if values else None,
        histogram=histogram(values),
    )
