"""A summary with every kind of per-case result, including hostile text."""

from __future__ import annotations

from agent_eval_sandbox.config.models import ThresholdConfig
from agent_eval_sandbox.judges.aggregate import reduce_samples
from agent_eval_sandbox.judges.results import CaseResult, Sample
from agent_eval_sandbox.report.summary import JudgeMeta, Summary, summarize

SCRIPT = "<script>document.body.setAttribute('data-pwned','1')</script>"
HOSTILE_CASE = 'case-"2"<b>'


def per_case() -> dict[str, dict[str, CaseResult]]:
    unstable = reduce_samples("llm", [Sample(value=4, rationale="good"), Sample(value=2, rationale=f"meh {SCRIPT}"), Sample(error="timeout")])
    return {
        "case-1": {"correct": CaseResult.scored("check", True, "all good"), "quality": CaseResult.scored("llm", 5, "excellent")},
        HOSTILE_CASE: {"correct": CaseResult.scored("check", False, f"bad {SCRIPT}\x00\x1b[31m"),
                       "quality": CaseResult.errored("llm", "returned 7, outside its declared score_range [1, 5]")},
        "case-3": {"correct": CaseResult.skipped("check", "Skipped: condition 'x' is false"), "quality": unstable},
    }


def make_summary(thresholds: dict[str, ThresholdConfig] | None = None) -> Summary:
    return summarize(
        run_id="r-1",
        eval_name="demo",
        title="Demo <Report>",
        config_path="/p/eval.yaml",
        scored_at="2025-01-01T00:00:00+00:00",
        judges=[JudgeMeta("correct", "check"), JudgeMeta("quality", "llm", (1.0, 5.0), None)],
        per_case=per_case(),
        thresholds=thresholds if thresholds is not None else {"correct": ThresholdConfig(min_pass_rate=0.9), "quality": ThresholdConfig(min_mean=4.0)},
        run_metrics={"cost_per_turn_usd": 0.01, "cache_hit_rate": 0.5},
    )
