"""What `run`, `score` and `report` print after judging (pure): one way, from the `Summary`.

    <eval>: 3 planned cases (2 ran, 1 completed), 2 judges (run <id>)
      greeted: pass_rate=33.3% (1 of 3 cases passed; 2 scored, 0 errored, 0 skipped, 1 never ran)
      quality: mean=3.50 over 3 cases (2 scored, 0 errored, 0 skipped, 1 never ran)
      cost: $0.0123 (scripted: offline run, no model was billed)
    FAILURES: 2 (case × judge)
      002-greet-grace × greeted: FAIL — 'Hello, Grace' not in 0 collected file(s)
    NOT COMPLETED: 2 of 3 cases
      003-fix-typo: timed_out after 120.0s — timed out after 120s
      004-x: infra_error, never ran — creating sandbox failed: …
    run directory: /…/runs/quickstart/<id>
      report: /…/report.html
    REGRESSIONS: 1 detected
      [greeted] pass_rate: >= 1.0 -> 0.3333

The pass rate rule, everywhere: passed cases over the cases the judge applies
to — scored ones plus those that never ran (which count as failing); judge
errors and skipped cases are counted beside it, not in it.
"""

from __future__ import annotations

from pathlib import Path

from agent_eval_sandbox.judges.results import CaseResult, JudgeStats
from agent_eval_sandbox.judges.standing import one_line
from agent_eval_sandbox.judges.thresholds import regression_lines, regressions
from agent_eval_sandbox.report.summary import CaseEnding, Summary

MAX_FAILURE_LINES = 30
RATIONALE_CHARS = 160


def counts_text(stats: JudgeStats) -> str:
    text = f"{stats.scored_cases} scored, {stats.errored_cases} errored, {stats.skipped_cases} skipped"
    if stats.not_run_cases:
        text += f", {stats.not_run_cases} never ran"
    if stats.incomplete_cases:
        text += f", {stats.incomplete_cases} incomplete"
    return text


def metric_text(stats: JudgeStats) -> str:
    """`pass_rate=66.7% (2 of 3 cases passed; …)`, `mean=3.50 over 3 cases (…)`, or the judge's status."""
    judged = stats.scored_cases + stats.not_run_cases
    if stats.pass_rate is not None:
        passed = round(stats.pass_rate * judged)
        return f"pass_rate={stats.pass_rate:.1%} ({passed} of {judged} cases passed; {counts_text(stats)})"
    if stats.mean is not None:
        return f"mean={stats.mean:.2f} over {judged} cases ({counts_text(stats)})"
    return f"{stats.status} ({counts_text(stats)})"


def judge_lines(summary: Summary) -> list[str]:
    lines = []
    for name, stats in summary.judges.items():
        note = ""
        if stats.stability is not None:
            s = stats.stability
            note = f"  [{s.stable_cases}/{s.total_cases} stable over {s.samples} samples]"
        lines.append(f"  {name}: {metric_text(stats)}{note}")
    return lines


def cost_text(summary: Summary) -> str | None:
    if summary.cost_usd is None:
        return None
    if summary.offline:
        return f"${summary.cost_usd:.4f} (scripted: offline run, priced from the scripts' usage; no model was billed)"
    return f"${summary.cost_usd:.4f}"


def _failing(result: CaseResult, min_mean: float | None) -> str | None:
    """Why a result is a failure worth listing, or None. Never-ran results are listed with their case."""
    if result.status == "error":
        return f"ERROR — {result.error or 'the judge errored'}"
    if result.status != "scored":
        return None
    if result.value is False:
        return f"FAIL — {result.rationale or 'verdict: fail'}"
    value = result.value
    if min_mean is not None and not isinstance(value, bool) and value is not None and value < min_mean:
        return f"score {value} below min_mean {min_mean} — {result.rationale}"
    return None


def failure_lines(summary: Summary, limit: int = MAX_FAILURE_LINES) -> list[str]:
    """Each failing case × judge, its rationale on one line (cases that never ran are listed apart)."""
    found = []
    for case_id, results in summary.per_case.items():
        for judge, result in results.items():
            gates = summary.thresholds.config.get(judge)
            why = _failing(result, gates.min_mean if gates else None)
            if why is not None:
                mark = f" (incomplete: {result.end_reason})" if result.incomplete else ""
                found.append(f"  {case_id} × {judge}{mark}: {one_line(why, RATIONALE_CHARS)}")
    if not found:
        return []
    more = [f"  … and {len(found) - limit} more (see report.html)"] if len(found) > limit else []
    return [f"FAILURES: {len(found)} (case × judge)", *found[:limit], *more]


def ending_text(ending: CaseEnding) -> str:
    how = ending.end_reason
    if not ending.ran:
        how += ", never ran"
    elif ending.duration_s is not None:
        how += f" after {ending.duration_s:.1f}s"
    if ending.exit_code not in (None, 0):
        how += f" (exit {ending.exit_code})"
    return how + (f" — {one_line(ending.error, RATIONALE_CHARS)}" if ending.error else "")


def not_completed_lines(summary: Summary, limit: int = MAX_FAILURE_LINES) -> list[str]:
    cases = summary.cases
    if cases is None or not cases.not_completed:
        return []
    lines = [f"  {case_id}: {ending_text(ending)}" for case_id, ending in cases.not_completed.items()]
    more = [f"  … and {len(lines) - limit} more (see report.html)"] if len(lines) > limit else []
    return [f"NOT COMPLETED: {len(lines)} of {cases.planned} cases", *lines[:limit], *more]


def step_lines(summary: Summary, limit: int = MAX_FAILURE_LINES) -> list[str]:
    """A pipeline's cases: a line per step (its end reason and exit code, or why it never ran)."""
    cases = summary.cases
    if cases is None or not any(e.steps for e in cases.endings.values()):
        return []
    lines = [f"  {case_id}: " + " · ".join(e.steps) for case_id, e in cases.endings.items() if e.steps]
    more = [f"  … and {len(lines) - limit} more (see report.html)"] if len(lines) > limit else []
    return ["STEPS:", *lines[:limit], *more]


def run_lines(summary: Summary) -> list[str]:
    """The run-level verdicts beside the thresholds: interrupted, infrastructure errors, nothing completed."""
    cases = summary.cases
    if cases is None:
        return []
    lines = []
    if cases.interrupted:
        finished = sum(1 for e in cases.endings.values() if e.end_reason != "interrupted")
        lines.append(f"INTERRUPTED: {finished} of {cases.planned} cases finished before the run was stopped")
    if cases.infra_errors:
        lines.append(f"INFRASTRUCTURE ERRORS: {cases.infra_errors} case(s) failed in the tool's own plumbing, "
                     "not the skill (exit 4): re-run them")
    if cases.nothing_completed:
        lines.append(f"NO CASE COMPLETED: 0 of {cases.planned} planned cases ended by themselves (exit 1)")
    return lines


def headline(summary: Summary) -> str:
    cases = summary.cases
    if cases is None:
        count = f"{len(summary.per_case)} cases"
    else:
        count = f"{cases.planned} planned cases ({cases.ran} ran, {cases.completed} completed)"
    return f"{summary.eval}: {count}, {len(summary.judges)} judges (run {summary.run_id})"


def beside_judges_lines(summary: Summary) -> list[str]:
    """The reward's distribution (with a `reward:` block) and the pairwise tally (after a comparison)."""
    lines = []
    reward = summary.reward
    if reward is not None and reward.mean is not None:
        never = f", {reward.not_run} never ran (0.0)" if reward.not_run else ""
        lines.append(f"  reward: mean={reward.mean:.3f} min={reward.min:.3f} max={reward.max:.3f} "
                     f"over {reward.cases} cases ({reward.mode}){never}")
    pair = summary.pairwise
    if pair is not None:
        win_rate = f"{pair.win_rate:.1%}" if pair.win_rate is not None else "n/a"
        lines.append(f"  pairwise vs {pair.run_b}: win_rate={win_rate} ({pair.wins_a} won, {pair.wins_b} lost, "
                     f"{pair.ties} tied, {pair.errors} errored, {pair.not_run} not run)")
    return lines


def text_lines(summary: Summary, run_dir: Path, html: Path) -> list[str]:
    """Per-judge results, the failures, the cases that did not complete, where the run is, the verdict."""
    lines = [headline(summary), *judge_lines(summary), *beside_judges_lines(summary)]
    for key, value in (summary.run_metrics or {}).items():
        lines.append(f"  {key}: {value:.1%}" if "rate" in key else f"  {key}: {value:g}")
    cost = cost_text(summary)
    if cost is not None:
        lines.append(f"  cost: {cost}")
    lines += failure_lines(summary)
    lines += step_lines(summary)
    lines += not_completed_lines(summary)
    lines += [f"run directory: {run_dir}", f"  report: {html}"]
    lines += run_lines(summary)
    lines += regression_lines(summary.thresholds.checks)
    return lines


VERDICT_WORDS = {0: "PASS", 1: "FAIL", 4: "INFRASTRUCTURE ERROR"}


def verdict_line(summary: Summary, exit_code: int) -> str:
    """The one line -q prints: the verdict, what it rests on, the exit code."""
    cases = summary.cases
    completed = f"{cases.completed}/{cases.planned} cases completed" if cases is not None else (
        f"{len(summary.per_case)} cases")
    failed = len(regressions(summary.thresholds.checks))
    return (f"{VERDICT_WORDS.get(exit_code, 'FAIL')}: {summary.eval} run {summary.run_id}: {completed}, "
            f"{failed} regression(s) (exit {exit_code})")
