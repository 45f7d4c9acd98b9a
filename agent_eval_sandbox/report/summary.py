"""summary.yaml / summary.json: the stored judge results of a run, in the reference's shape.

Top-level keys as agent-eval-harness writes them — `run_id`, `judges`
(per-judge mean, pass_rate, scored/errored cases, stability), `per_case`
(`<case>.<judge>`: value, rationale, judge_type, …), `run_metrics` — plus
ours: `eval`, `title`, `config_path`, `scored_at`, `thresholds` (the gates
used and their verdict), `cases` (planned, ran, completed, how each case
ended), `offline` and `cost_usd`. `summarize` is pure, so `report` can rebuild
every statistic and verdict from the stored per-case results and the case
outcomes alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agent_eval_sandbox.compare.models import PairwiseSummary
from agent_eval_sandbox.config.models import PAIRWISE, THRESHOLD_KEYS, RewardConfig, ThresholdConfig
from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.judges.aggregate import aggregate
from agent_eval_sandbox.judges.results import CaseResult, JudgeMeta, JudgeStats
from agent_eval_sandbox.judges.reward import RewardSummary, summarize_rewards
from agent_eval_sandbox.judges.standing import agent_ran, standing
from agent_eval_sandbox.judges.thresholds import (
    ThresholdCheck,
    evaluate_thresholds,
    regressions,
)
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.models import CaseOutcome, StepOutcome
from agent_eval_sandbox.rundir.read import FinishedRun, read_data
from agent_eval_sandbox.rundir.write import write_json, write_yaml


class ThresholdsVerdict(BaseModel):
    passed: bool
    config: dict[str, ThresholdConfig]
    checks: list[ThresholdCheck]

    @property
    def regressions(self) -> list[ThresholdCheck]:
        return regressions(self.checks)


class CaseEnding(BaseModel):
    """How one case ended, as the summary keeps it (from its `CaseOutcome`; None: no outcome recorded)."""

    end_reason: str
    ran: bool
    completed: bool
    exit_code: int | None = None
    duration_s: float | None = None
    error: str | None = None
    steps: list[str] = Field(default_factory=list)  # a pipeline's steps, one line each (`step_line`)


def step_line(step: StepOutcome, *, named: bool = True) -> str:
    """`<id>: <end reason> (exit N) after Xs`, or why it never ran (without the id unless `named`)."""
    name = f"{step.step_id}: " if named else ""
    if not step.ran:
        return f"{name}not run" + (f" ({step.skipped or step.error})" if step.skipped or step.error else "")
    line = f"{name}{step.end_reason}"
    if step.exit_code is not None:
        line += f" (exit {step.exit_code})"
    if step.duration_s is not None:
        line += f" after {step.duration_s:.1f}s"
    if step.failed and step.on_failure == "continue":
        line += ", on_failure: continue"
    return line


class CaseCounts(BaseModel):
    """`cases:` of the summary: the planned cases, how many ran and completed, and how each ended.

    `ran`: the agent's command started; `completed`: it ended by itself (`exited`).
    `infra_errors`: cases ended by the tool's own plumbing (`infra_error`).
    `interrupted`: the run was stopped by Ctrl-C/SIGTERM (run_result.json).
    """

    planned: int = 0
    ran: int = 0
    completed: int = 0
    infra_errors: int = 0
    interrupted: bool = False
    endings: dict[str, CaseEnding] = Field(default_factory=dict)

    @property
    def not_completed(self) -> dict[str, CaseEnding]:
        return {case: ending for case, ending in self.endings.items() if not ending.completed}

    @property
    def nothing_completed(self) -> bool:
        return self.planned > 0 and self.completed == 0

    def to_data(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"endings"})
        # `steps` only for a pipeline's cases: a summary of other runs reads as before.
        data["endings"] = {case: e.model_dump(mode="json", exclude_none=True,
                                              exclude={"steps"} if not e.steps else None)
                           for case, e in self.endings.items()}
        return data


def case_ending(outcome: CaseOutcome | None) -> CaseEnding:
    if outcome is None:
        return CaseEnding(end_reason="error", ran=False, completed=False, error="no outcome was recorded for the case")
    return CaseEnding(end_reason=outcome.end_reason, ran=agent_ran(outcome), completed=standing(outcome) == "completed",
                      exit_code=outcome.exit_code, duration_s=outcome.duration_s, error=outcome.error,
                      steps=[step_line(step) for step in outcome.steps])


def count_cases(outcomes: Mapping[str, CaseOutcome | None], *, planned: int = 0,
                interrupted: bool = False) -> CaseCounts:
    """The `cases:` block from every case's outcome (pure); `planned` never counts fewer than the cases given."""
    endings = {case: case_ending(outcome) for case, outcome in outcomes.items()}
    return CaseCounts(
        planned=max(planned, len(endings)),
        ran=sum(1 for e in endings.values() if e.ran),
        completed=sum(1 for e in endings.values() if e.completed),
        infra_errors=sum(1 for e in endings.values() if e.end_reason == "infra_error"),
        interrupted=interrupted,
        endings=endings,
    )


def read_cases(run: FinishedRun, case_ids: Sequence[str]) -> CaseCounts:
    """The `cases:` block of a run directory: its case outcomes, and run_result.json's `planned`/`interrupted`."""
    planned = run.result.get("planned")
    return count_cases({case: run.outcome(case) for case in case_ids},
                       planned=planned if isinstance(planned, int) and not isinstance(planned, bool) else 0,
                       interrupted=run.result.get("interrupted") is True)


class Summary(BaseModel):
    run_id: str
    eval: str
    title: str = "Agent Eval Report"
    config_path: str | None = None
    scored_at: str
    judges: dict[str, JudgeStats]
    per_case: dict[str, dict[str, CaseResult]]
    run_metrics: dict[str, float] | None = None
    thresholds: ThresholdsVerdict
    reward: RewardSummary | None = None  # with a `reward:` block: each case's reward and their distribution
    pairwise: PairwiseSummary | None = None  # after a comparison with a baseline that has a pairwise judge
    cases: CaseCounts | None = None  # None: not known (a summary written before this field)
    offline: bool = False  # the model was scripted: costs are what the scripts' `usage:` made up
    cost_usd: float | None = None  # the run's total, as the gateways charged it

    @property
    def judge_meta(self) -> list[JudgeMeta]:
        return [JudgeMeta(n, s.judge_type, s.score_range, s.feedback_type) for n, s in self.judges.items()]

    def to_data(self) -> dict[str, Any]:
        """Plain data for the files: reference keys first, absent extras left out."""
        return {
            "run_id": self.run_id,
            "judges": {name: stats.to_data() for name, stats in self.judges.items()},
            "per_case": {
                case: {judge: result.to_data() for judge, result in results.items()}
                for case, results in self.per_case.items()
            },
            "run_metrics": self.run_metrics,
            "eval": self.eval,
            "title": self.title,
            "config_path": self.config_path,
            "scored_at": self.scored_at,
            "thresholds": {
                "passed": self.thresholds.passed,
                "config": {
                    judge: gates.model_dump(exclude_none=True, include=set(THRESHOLD_KEYS))
                    for judge, gates in self.thresholds.config.items()
                },
                "checks": [check.model_dump() for check in self.thresholds.checks],
                "regressions": [check.line() for check in self.thresholds.regressions],
            },
            **({"reward": self.reward.to_data()} if self.reward is not None else {}),
            **({"pairwise": self.pairwise.to_data()} if self.pairwise is not None else {}),
            "cases": self.cases.to_data() if self.cases is not None else None,
            "offline": self.offline,
            "cost_usd": self.cost_usd,
        }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compute_run_metrics(run_result: Mapping[str, Any]) -> dict[str, float] | None:
    """Workload-agnostic efficiency figures from run_result.json (None if it has none).

    Token counts are read under the reference's names (input, output,
    cache_read, cache_create) or the API's (input_tokens, …).
    """
    cost = _number(run_result.get("cost_usd"))
    turns = run_result.get("num_turns")
    turns = turns if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0 else None
    raw_usage = run_result.get("token_usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}

    def tokens(*names: str) -> float:
        return next((v for v in (_number(usage.get(n)) for n in names) if v is not None), 0.0)

    fresh = tokens("input", "input_tokens")
    out = tokens("output", "output_tokens")
    cache_read = tokens("cache_read", "cache_read_input_tokens")
    cache_create = tokens("cache_create", "cache_creation_input_tokens")
    total_in = fresh + cache_read + cache_create
    metrics: dict[str, float] = {}
    if cost is not None and turns:
        metrics["cost_per_turn_usd"] = round(cost / turns, 6)
    if turns and out:
        metrics["output_tokens_per_turn"] = round(out / turns, 2)
    if total_in > 0:
        metrics["cache_hit_rate"] = round(cache_read / total_in, 6)
    if cost is not None and total_in + out > 0:
        metrics["cost_per_mtok_usd"] = round(cost / (total_in + out) * 1_000_000, 4)
    return metrics or None


def summarize(
    *,
    run_id: str,
    eval_name: str,
    title: str,
    config_path: str | None,
    scored_at: str,
    judges: Sequence[JudgeMeta],
    per_case: Mapping[str, Mapping[str, CaseResult]],
    thresholds: Mapping[str, ThresholdConfig],
    run_metrics: dict[str, float] | None,
    cases: CaseCounts | None = None,
    offline: bool = False,
    cost_usd: float | None = None,
) -> Summary:
    """Statistics and the thresholds verdict from per-case results (pure)."""
    stats = {
        meta.name: aggregate(
            meta.judge_type,
            [results[meta.name] for results in per_case.values() if meta.name in results],
            score_range=meta.score_range,
            feedback_type=meta.feedback_type,
        )
        for meta in judges
    }
    checks = evaluate_thresholds(stats, thresholds)
    return Summary(
        run_id=run_id,
        eval=eval_name,
        title=title,
        config_path=config_path,
        scored_at=scored_at,
        judges=stats,
        per_case={case: dict(results) for case, results in per_case.items()},
        run_metrics=run_metrics,
        thresholds=ThresholdsVerdict(passed=not regressions(checks), config=dict(thresholds), checks=checks),
        cases=cases,
        offline=offline,
        cost_usd=cost_usd,
    )


def with_reward(summary: Summary, config: RewardConfig | None, never_ran: Collection[str]) -> Summary:
    """The summary with each case's reward (judges/reward.py), when the eval has a `reward:` block."""
    if config is None:
        return summary.model_copy(update={"reward": None})
    metas = {meta.name: meta for meta in summary.judge_meta}
    return summary.model_copy(update={"reward": summarize_rewards(config, metas, summary.per_case, never_ran)})


def pairwise_stats(pairwise: PairwiseSummary) -> JudgeStats:
    """The pairwise judge's statistics, for its `min_win_rate` and `max_error_rate` gates."""
    compared = pairwise.cases_compared
    unscored = pairwise.errors + pairwise.not_run
    return JudgeStats(judge_type="pairwise", win_rate=pairwise.win_rate,
                      error_rate=unscored / compared if compared else None, scored_cases=compared - unscored,
                      errored_cases=unscored, total_cases=compared,
                      status="OK" if compared > unscored else ("ERROR" if compared else "SKIP"))


def with_pairwise(summary: Summary, pairwise: PairwiseSummary | None) -> Summary:
    """The summary with a comparison's pairwise verdicts, and its thresholds checked again with them:
    `min_win_rate` is a gate of the `pairwise` judge (it is not one of `judges`, which are scored per case)."""
    stats: dict[str, JudgeStats] = dict(summary.judges)
    if pairwise is not None:
        stats[PAIRWISE] = pairwise_stats(pairwise)
    checks = evaluate_thresholds(stats, summary.thresholds.config)
    thresholds = ThresholdsVerdict(passed=not regressions(checks), config=summary.thresholds.config, checks=checks)
    return summary.model_copy(update={"pairwise": pairwise, "thresholds": thresholds})


def write_summary(run: RunDir, summary: Summary) -> tuple[Path, Path]:
    data = summary.to_data()
    write_yaml(run.summary_yaml, data)
    write_json(run.summary_json, data)
    return run.summary_yaml, run.summary_json


def load_summary(run: RunDir) -> Summary:
    """The stored judge results; summary.json first (exact), summary.yaml as a fallback."""
    for path in (run.summary_json, run.summary_yaml):
        if not path.is_file():
            continue
        data, problem = read_data(path, max_bytes=256 * 1024 * 1024, max_nodes=50_000_000)
        if problem:
            raise RunDirError(problem, fix="re-judge the run with `agent-eval-sandbox score RUN_DIR`")
        try:
            return Summary.model_validate(_stored_shape(data))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise RunDirError(
                f"{path}: not a summary this tool wrote ({where}: {first['msg']})",
                fix="re-judge the run with `agent-eval-sandbox score RUN_DIR`",
            ) from None
    raise RunDirError(
        f"{run.root}: the run has not been judged yet (no {run.summary_json.name} or {run.summary_yaml.name})",
        fix="judge it with `agent-eval-sandbox score RUN_DIR`",
    )


def _stored_shape(data: Any) -> Any:
    # The files hold regression lines for people; the model rebuilds them from the checks.
    if isinstance(data, dict) and isinstance(data.get("thresholds"), dict):
        data = {**data, "thresholds": {k: v for k, v in data["thresholds"].items() if k != "regressions"}}
    return data
