"""Per-case facts of a run for the reports: how each case ended, what it cost, where its logs are."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from agent_eval_sandbox.rundir.layout import CaseDir, RunDir, relative_link
from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.rundir.read import FinishedRun


def _case_links(case: CaseDir) -> tuple[tuple[Path, str], ...]:
    """A case's files the report links to, in the order it lists them."""
    return ((case.transcript, "transcript"), (case.stdout_log, "stdout"), (case.stderr_log, "stderr"),
            (case.events, "events"), (case.gateway_log, "gateway log"), (case.tool_decisions, "tool decisions"),
            (case.workspace_diff, "diff"))


def _run_links(run: RunDir) -> tuple[tuple[Path, str], ...]:
    logs = run.batch_logs
    return ((logs.stdout_log, "stdout"), (logs.stderr_log, "stderr"), (logs.events, "events"),
            (run.run_result, run.run_result.name))


@dataclass(frozen=True)
class Link:
    label: str
    href: str  # relative to the run directory, URL-quoted


@dataclass(frozen=True)
class CaseFacts:
    end_reason: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    cost_usd: float | None = None
    num_turns: int | None = None
    links: tuple[Link, ...] = ()


def facts_from(outcome: CaseOutcome | None, links: tuple[Link, ...] = ()) -> CaseFacts:
    if outcome is None:
        return CaseFacts(links=links)
    return CaseFacts(
        end_reason=outcome.end_reason,
        exit_code=outcome.exit_code,
        duration_s=outcome.duration_s,
        cost_usd=outcome.cost_usd,
        num_turns=outcome.num_turns,
        links=links,
    )


def _links(run: RunDir, files: tuple[tuple[Path, str], ...]) -> tuple[Link, ...]:
    return tuple(Link(label, quote(relative_link(run, path))) for path, label in files if path.is_file())


def read_case_facts(run: FinishedRun, case_ids: list[str]) -> dict[str, CaseFacts]:
    """Each case's facts: how it ended (its outcome) and which of its files exist."""
    return {case_id: facts_from(run.outcome(case_id), _links(run.dir, _case_links(run.case(case_id))))
            for case_id in case_ids}


def run_links(run: FinishedRun) -> tuple[Link, ...]:
    return _links(run.dir, _run_links(run.dir))
