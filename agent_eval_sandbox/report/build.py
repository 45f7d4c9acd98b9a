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

from agent_eval_sandbox import exit_codes
from agent_eval_sandbox.compare.store import read_comparison
from agent_eval_sandbox.config.models import RewardConfig
from agent_eval_sandbox.judges.reward import reward_record
from agent_eval_sandbox.judges.standing import not_run_cases
from agent_eval_sandbox.judges.thresholds import regressions
from agent_eval_sandbox.report.facts import read_case_view, read_run_view
from agent_eval_sandbox.report.html import render_html
from agent_eval_sandbox.report.junit import render_junit
from agent_eval_sandbox.report.summary import (
    Summary,
    load_summary,
    read_cases,
    summarize,
    with_pairwise,
    with_reward,
    write_summary,
)
from agent_eval_sandbox.report.text import text_lines, verdict_line
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
        return verdict_exit_code(self.summary)

    def text_lines(self) -> list[str]:
        """What `run`, `score` and `report` print (report/text.py)."""
        return text_lines(self.summary, self.run_dir, self.reports.html)

    def verdict_line(self) -> str:
        """The one line `-q` prints."""
        return verdict_line(self.summary, self.exit_code)

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
    summary = with_reward(summary, reward, not_run_cases(run.outcome, summary.per_case))
    comparison, problem = read_comparison(run.dir)
    return with_pairwise(summary, comparison.pairwise if comparison else None), [problem] if problem else []


def _write_rewards(run: FinishedRun, summary: Summary) -> None:
    """Each case's `reward.json` (the reference's Harbor verifier file), when the eval composes a reward."""
    if summary.reward is None:
        return
    for case_id, reward in summary.reward.per_case.items():
        if is_case_id(case_id):
            write_json(run.case(case_id).ensure().reward, reward_record(reward, summary.per_case.get(case_id, {})))


def verdict_exit_code(summary: Summary) -> int:
    """4 when a case hit an infrastructure error (whatever else happened: the verdict lacks those cases);
    1 when a threshold regressed or no planned case completed; else 0."""
    cases = summary.cases
    if cases is not None and cases.infra_errors:
        return exit_codes.INFRA
    if regressions(summary.thresholds.checks) or (cases is not None and cases.nothing_completed):
        return exit_codes.REGRESSION
    return exit_codes.OK


def run_cost(run: FinishedRun) -> float | None:
    """The run's total cost as run_result.json recorded it."""
    cost = run.result.get("cost_usd")
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def write_reports(run: FinishedRun, summary: Summary, *, junit_fail_on_judge: bool = False) -> ReportPaths:
    summary_yaml, summary_json = write_summary(run.dir, summary)
    _write_rewards(run, summary)
    outcomes = {case_id: run.outcome(case_id) if is_case_id(case_id) else None
                for case_id in [*summary.per_case, *run.case_ids]}
    comparison, _ = read_comparison(run.dir)
    page = render_html(summary, read_run_view(run, summary.eval), outcomes,
                       lambda case_id: read_case_view(run, case_id), comparison=comparison)
    write_text(run.dir.report_html, page)
    write_text(run.dir.junit_xml, render_junit(summary, fail_on_judge=junit_fail_on_judge))
    return ReportPaths(summary_yaml, summary_json, run.dir.report_html, run.dir.junit_xml)


def build_reports(run_dir: Path | str, *, junit_fail_on_judge: bool = False) -> ScoreResult:
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
        cases=read_cases(run, list(stored.per_case)),
        offline=run.meta.get("offline") is True,
        cost_usd=run_cost(run),
    )
    summary, problems = finish_summary(run, summary, stored.reward.reward_config() if stored.reward else None)
    reports = write_reports(run, summary, junit_fail_on_judge=junit_fail_on_judge)
    return ScoreResult(run_dir=run.root, summary=summary, reports=reports, warnings=[*run.problems, *problems])
