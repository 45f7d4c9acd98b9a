"""Writing a run's reports, and rebuilding them from stored judge results.

`write_reports` renders summary.yaml/json, report.html and junit.xml for a
summary; `build_reports` (the `report RUN_DIR` command) recomputes every
statistic and threshold verdict from the per-case results stored in
summary.json — no judge runs — and writes the reports again. Both return a
`ScoreResult`, the value the CLI prints (text or `--json`) and exits with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.compare.store import read_comparison
from agent_eval_sandbox.config.models import RewardConfig
from agent_eval_sandbox.judges.never_ran import never_ran_cases
from agent_eval_sandbox.judges.reward import reward_record
from agent_eval_sandbox.judges.thresholds import exit_code, regression_lines
from agent_eval_sandbox.report.facts import read_case_view, read_run_view
from agent_eval_sandbox.report.html import render_html
from agent_eval_sandbox.report.junit import render_junit
from agent_eval_sandbox.report.summary import (
    Summary,
    load_summary,
    summarize,
    with_pairwise,
    with_reward,
    write_summary,
)
from agent_eval_sandbox.rundir.layout import is_case_id
from agent_eval_sandbox.rundir.read import FinishedRun, open_finished_run
from agent_eval_sandbox.rundir.write import write_json, write_text


@dataclass(frozen=True)
class ReportPaths:
    summary_yaml: Path
    summary_json: Path
    html: Path
    junit: Path

    def to_json(self) -> dict[str, str]:
        return {"summary_yaml": str(self.summary_yaml), "summary_json": str(self.summary_json),
                "html": str(self.html), "junit": str(self.junit)}


@dataclass(frozen=True)
class ScoreResult:
    """A judged run: its summary, where the reports are, and what the process should exit with."""

    run_dir: Path
    summary: Summary
    reports: ReportPaths
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when every threshold is met (or none is set), 1 on a regression."""
        return exit_code(self.summary.thresholds.checks)

    def text_lines(self) -> list[str]:
        """What `score` / `report` print: per-judge results, then the REGRESSIONS block."""
        summary = self.summary
        lines = [f"{summary.eval}: {len(summary.per_case)} cases, {len(summary.judges)} judges (run {summary.run_id})"]
        for name, stats in summary.judges.items():
            note = ""
            if stats.stability is not None:
                s = stats.stability
                note = f"  [{s.stable_cases}/{s.total_cases} stable over {s.samples} samples]"
            counts = f"  ({stats.scored_cases} scored, {stats.errored_cases} errored, {stats.skipped_cases} skipped)"
            if stats.pass_rate is not None:
                lines.append(f"  {name}: pass_rate={stats.pass_rate:.1%}{note}{counts}")
            elif stats.mean is not None:
                lines.append(f"  {name}: mean={stats.mean:.2f}{note}{counts}")
            else:
                lines.append(f"  {name}: {stats.status}{counts}")
        if summary.reward is not None and summary.reward.mean is not None:
            reward = summary.reward
            never = f", {reward.not_run} never ran (0.0)" if reward.not_run else ""
            lines.append(f"  reward: mean={reward.mean:.3f} min={reward.min:.3f} max={reward.max:.3f} "
                         f"over {reward.cases} cases ({reward.mode}){never}")
        if summary.pairwise is not None:
            pair = summary.pairwise
            win_rate = f"{pair.win_rate:.1%}" if pair.win_rate is not None else "n/a"
            lines.append(f"  pairwise vs {pair.run_b}: win_rate={win_rate} ({pair.wins_a} won, {pair.wins_b} lost, "
                         f"{pair.ties} tied, {pair.errors} errored, {pair.not_run} not run)")
        for key, value in (summary.run_metrics or {}).items():
            lines.append(f"  {key}: {value:.1%}" if "rate" in key else f"  {key}: {value:g}")
        lines.append(f"  report: {self.reports.html}")
        lines += regression_lines(summary.thresholds.checks)
        return lines

    def to_json(self) -> dict[str, Any]:
        """The `--json` document."""
        data = self.summary.to_data()
        return {
            "run_dir": str(self.run_dir),
            "passed": self.exit_code == 0,
            "exit_code": self.exit_code,
            "regressions": data["thresholds"]["regressions"],
            "reports": self.reports.to_json(),
            "warnings": list(self.warnings),
            **data,
        }


def finish_summary(run: FinishedRun, summary: Summary, reward: RewardConfig | None) -> tuple[Summary, list[str]]:
    """The summary with what is computed beside the judges: each case's reward (with a `reward:` block)
    and the pairwise verdicts of the run's comparison.json (its thresholds checked again). Also says
    what could not be read."""
    summary = with_reward(summary, reward, never_ran_cases(run, summary.per_case))
    comparison, problem = read_comparison(run.dir)
    return with_pairwise(summary, comparison.pairwise if comparison else None), [problem] if problem else []


def _write_rewards(run: FinishedRun, summary: Summary) -> None:
    """Each case's `reward.json` (the reference's Harbor verifier file), when the eval composes a reward."""
    if summary.reward is None:
        return
    for case_id, reward in summary.reward.per_case.items():
        if is_case_id(case_id):
            write_json(run.case(case_id).ensure().reward, reward_record(reward, summary.per_case.get(case_id, {})))


def write_reports(run: FinishedRun, summary: Summary) -> ReportPaths:
    summary_yaml, summary_json = write_summary(run.dir, summary)
    _write_rewards(run, summary)
    outcomes = {case_id: run.outcome(case_id) if is_case_id(case_id) else None
                for case_id in [*summary.per_case, *run.case_ids]}
    comparison, _ = read_comparison(run.dir)
    page = render_html(summary, read_run_view(run, summary.eval), outcomes,
                       lambda case_id: read_case_view(run, case_id), comparison=comparison)
    write_text(run.dir.report_html, page)
    write_text(run.dir.junit_xml, render_junit(summary))
    return ReportPaths(summary_yaml, summary_json, run.dir.report_html, run.dir.junit_xml)


def build_reports(run_dir: Path | str) -> ScoreResult:
    """Rebuild summary, report.html and junit.xml from the stored judge results (no judging)."""
    run = open_finished_run(run_dir)
    stored = load_summary(run.dir)
    summary = summarize(
        run_id=stored.run_id,
        eval_name=stored.eval,
        title=stored.title,
        config_path=stored.config_path,
        scored_at=stored.scored_at,
        judges=stored.judge_meta,
        per_case=stored.per_case,
        thresholds=stored.thresholds.config,
        run_metrics=stored.run_metrics,
    )
    summary, problems = finish_summary(run, summary, stored.reward.reward_config() if stored.reward else None)
    reports = write_reports(run, summary)
    return ScoreResult(run_dir=run.root, summary=summary, reports=reports, warnings=[*run.problems, *problems])
