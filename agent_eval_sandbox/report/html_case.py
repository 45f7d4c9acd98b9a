"""One case of report.html (pure): how it ended, its verdicts, what it was asked, what it did and left.

Each case's HTML is held to a budget of characters (`CASE_BUDGET`); every
piece is also cut on its own, and each cut says where the whole is in the
run directory. A case the page has no room for gets a stub with its verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_eval_sandbox.judges.results import CaseResult, JudgeStats
from agent_eval_sandbox.report.failures import judged_incomplete
from agent_eval_sandbox.report.html_conversation import TEXT_CAP, UNVERIFIED, render_conversation
from agent_eval_sandbox.report.html_parts import (
    Budget,
    badge,
    count,
    cut_note,
    end_badge,
    end_css,
    esc,
    money,
    one_line,
    plural,
    pre,
    seconds,
    size,
)
from agent_eval_sandbox.report.summary import step_line
from agent_eval_sandbox.report.view import CaseView, FileView
from agent_eval_sandbox.rundir.models import CaseOutcome

CASE_BUDGET = 400_000
PROMPT_CAP = 20_000
FILE_CAP = 20_000
DIFF_CAP = 100_000
RATIONALE_CAP = 8_000
ERROR_CAP = 8_000
MAX_FINDINGS = 20
_OPEN_FILES = 4  # up to this many output files are shown unfolded


def _facts(outcome: CaseOutcome | None, offline: bool | None) -> str:
    if outcome is None:
        return '<p class="facts">No record of how this case ended: it has no run_result.json.</p>'
    bits = [f"end reason <code>{esc(outcome.end_reason)}</code>"]
    bits.append(f"exit code {esc('—' if outcome.exit_code is None else outcome.exit_code)}")
    if outcome.signal is not None:
        bits.append(f"signal {esc(outcome.signal)}")
    duration = seconds(outcome.duration_s)
    if outcome.agent_duration_s is not None:
        duration += f" (agent {seconds(outcome.agent_duration_s)})"
    elif not outcome.ran:
        duration += " (the agent never started)"
    bits.append(esc(duration))
    cost = money(outcome.cost_usd)
    bits.append(esc(f"{cost} scripted" if offline and outcome.cost_usd is not None else cost))
    if outcome.num_turns is not None:
        bits.append(f"{esc(outcome.num_turns)} turns")
    usage = outcome.token_usage
    if usage:
        tokens = sum(v for v in usage.values() if isinstance(v, int))
        bits.append(f"{count(tokens)} tokens")
    if outcome.gateway.refused:
        bits.append(f"{count(outcome.gateway.refused)} model requests refused by the gateway")
    if outcome.limits_hit:
        bits.append("limits hit: " + esc(", ".join(outcome.limits_hit[:10])))
    if outcome.permission_denials:
        bits.append(f"{count(len(outcome.permission_denials))} permission denials")
    return f'<p class="facts">{" · ".join(bits)}</p>'


def _error(outcome: CaseOutcome | None, budget: Budget, where: str) -> str:
    if outcome is None or not outcome.error:
        return ""
    what = "The tool's own plumbing failed (not the skill's doing)" if outcome.end_reason == "infra_error" else "Error"
    return (f'<div class="box box-bad"><b>{what}</b>'
            f"{pre(budget, outcome.error, ERROR_CAP, where)}</div>")


def _judges(results: Mapping[str, CaseResult], judges: Mapping[str, JudgeStats], outcome: CaseOutcome | None,
            budget: Budget, where: str, cap: int = RATIONALE_CAP) -> str:
    if not results:
        return '<p class="muted">No judge results for this case.</p>'
    rows = []
    for name, result in results.items():
        text = (result.error if result.status in ("error", "not_run") else result.rationale) or "(no rationale)"
        stability = ""
        if result.stability is not None:
            s = result.stability
            stability = f' <span class="muted">{"stable" if s.stable else "unstable"} over {s.samples} samples</span>'
        samples = ""
        for number, sample in enumerate(result.sample_rationales or [], start=1):
            value = "ERROR" if sample.error is not None else esc(sample.value)
            samples += (f'<div class="sample"><span class="muted">sample {number}: {value}</span>'
                        f"{pre(budget, sample.error or sample.rationale, cap // 4, where)}</div>")
        incomplete = judged_incomplete(result, outcome)
        rows.append(
            f'<div class="judge"><div class="jhead"><span class="jname">{esc(name)}</span> '
            f"{badge(result, judges.get(name), incomplete=incomplete)}{stability}</div>"
            f"{pre(budget, text, cap, where, 'rationale')}{samples}</div>"
        )
    return "".join(rows)


def _file_block(view: FileView, name: str, budget: Budget, unfold: bool) -> str:
    head = f"<code>{esc(name)}</code> <span class=\"muted\">· {esc(size(view.size))}</span>"
    if view.text is None:
        return (f'<div class="file"><div class="fhead">{head} <span class="badge skip">binary, not shown</span>'
                "</div></div>")
    markup, omitted = budget.text(view.text, FILE_CAP)
    note = ""
    if omitted or view.truncated:
        note = (f'<div class="cut">… only the start is shown ({count(len(view.text) - omitted)} characters);'
                f" the whole file is <code>{esc(view.path)}</code> in the run directory</div>")
    return (f'<details class="file"{" open" if unfold else ""}><summary>{head}</summary>'
            f"<pre>{markup}</pre>{note}</details>")


def _outputs(case: CaseView, budget: Budget) -> str:
    files = case.files
    changes = case.outcome.changes if case.outcome is not None else None
    parts = []
    if changes is not None and (changes.counts or changes.added or changes.modified or changes.deleted):
        got = {k: changes.counts.get(k, len(getattr(changes, k))) for k in ("added", "modified", "deleted")}
        line = f"{count(got['added'])} added, {count(got['modified'])} modified, {count(got['deleted'])} deleted"
        deleted = ""
        if changes.deleted:
            shown = ", ".join(changes.deleted[:50])
            deleted = f' <span class="muted">deleted: {esc(one_line(shown, 2000))}</span>'
        parts.append(f'<p>Workspace changes: {esc(line)}{deleted}</p>')
    if not files:
        parts.append('<p class="muted">No output files were collected.</p>')
    binary = sum(1 for f in files if f.text is None)
    for view in files:
        if budget.spent:
            parts.append(f'<div class="cut">… more files not shown; they are in <code>{esc(case.location)}/</code>'
                         " in the run directory</div>")
            break
        name = view.path.removeprefix(f"{case.location}/")
        parts.append(_file_block(view, name, budget, unfold=len(files) <= _OPEN_FILES))
    if case.files_not_shown:
        parts.append(f'<div class="cut">… and {count(case.files_not_shown)} more files, not listed here; they are'
                     f" in <code>{esc(case.location)}/</code> in the run directory</div>")
    label = f"Output files · {count(len(files) + case.files_not_shown)}"
    if binary:
        label += f" ({count(binary)} binary)"
    return f'<details class="part" open><summary><h4>{esc(label)}</h4></summary>{"".join(parts)}</details>'


def _diff(view: FileView | None, budget: Budget) -> str:
    if view is None:
        return ""
    text = view.text
    if text is None:
        return (f'<p class="muted">The workspace diff is not text ({esc(size(view.size))}):'
                f" <code>{esc(view.path)}</code></p>")
    markup, omitted = budget.text(text, DIFF_CAP)
    lines = []
    for line in markup.split("\n"):
        css = "add" if line.startswith("+") else "del" if line.startswith("-") else "hunk" if line.startswith(
            "@@") else ""
        lines.append(f'<span class="{css}">{line}</span>' if css else line)
    note = cut_note(omitted, view.path) if omitted else ""
    if view.truncated and not omitted:
        note = (f'<div class="cut">… only the start of the diff is shown; the whole diff ({esc(size(view.size))}) is'
                f" <code>{esc(view.path)}</code> in the run directory</div>")
    return (f'<details class="part"><summary><h4>Workspace diff · {esc(size(view.size))}</h4></summary>'
            f'<pre class="diff">{chr(10).join(lines)}</pre>{note}</details>')


def _integrity(outcome: CaseOutcome | None) -> str:
    if outcome is None or not outcome.ran:
        return ""
    check = outcome.integrity
    if not check.checked:
        return ('<div class="box box-warn">The agent\'s stream could not be checked against the gateway\'s record'
                " (nothing reached the gateway): this conversation is as the agent's side printed it.</div>")
    if not check.dropped and not check.unverified:
        return ""
    rows = "".join(
        f"<tr><td class=\"num\">{esc(f.get('line'))}</td><td>{esc(f.get('kind'))}</td>"
        f"<td>{esc(one_line(str(f.get('reason', '')), 400))}</td></tr>"
        for f in check.findings[:MAX_FINDINGS] if isinstance(f, Mapping)
    )
    more = len(check.findings) - MAX_FINDINGS
    more_note = f'<div class="cut">… {count(more)} more findings in run_result.json</div>' if more > 0 else ""
    table = (f"<table><thead><tr><th>stdout.log line</th><th>kind</th><th>why</th></tr></thead><tbody>{rows}"
             "</tbody></table>") if rows else ""
    return (f'<div class="box box-warn"><b>Integrity check:</b> {plural(check.dropped, "line")} of the agent\'s'
            " output dropped (the model never produced them; not shown below), "
            f"{count(check.unverified)} not verified (marked {UNVERIFIED} below).{table}{more_note}</div>")


def _steps(outcome: CaseOutcome, events: Sequence[Mapping[str, Any]], budget: Budget, events_file: str) -> str:
    """A pipeline's conversation, step by step, each under a line of how the step ended."""
    parts = []
    for step in outcome.steps:
        own = [e for e in events if e.get("step") == step.step_id]
        css = "ok" if step.ran and not step.failed else ("warn" if step.ran else "muted")
        line = esc(step_line(step, named=False))
        parts.append(f'<h5 class="step {css}">Step <code>{esc(step.step_id)}</code>: {line}</h5>')
        if own:
            parts.append(render_conversation(own, budget, events_file))
    return "".join(parts)


def _where(case: CaseView) -> str:
    if not case.present:
        return '<p class="where muted">The run directory has nothing more of this case.</p>'
    return (f'<p class="where muted">The whole record of this case is in the run directory, in '
            f"<code>{esc(case.location)}/</code>: {esc(', '.join(case.present))}.</p>")


def _verdicts(results: Mapping[str, CaseResult]) -> str:
    failed = sum(1 for r in results.values() if r.status in ("error", "not_run") or r.value is False)
    if not results:
        return ""
    if failed:
        return f' <span class="badge fail">{failed} of {plural(len(results), "verdict")} failed</span>'
    return ""


def _head(case_id: str, outcome: CaseOutcome | None, results: Mapping[str, CaseResult], anchor: str) -> str:
    return (f'<article class="case st-{end_css(outcome)}" id="{anchor}">'
            f'<h3><a class="self" href="#{anchor}">#</a> {esc(case_id)} {end_badge(outcome)}{_verdicts(results)}</h3>')


def render_case(case: CaseView, results: Mapping[str, CaseResult], judges: Mapping[str, JudgeStats], anchor: str,
                *, offline: bool | None = None, budget_chars: int = CASE_BUDGET) -> str:
    """A case's full detail, within `budget_chars` characters (plus at most one piece's overrun)."""
    budget = Budget(budget_chars)
    outcome = case.outcome
    events_file = f"{case.location}/events.json"
    parts = [_head(case.case_id, outcome, results, anchor), _facts(outcome, offline),
             _error(outcome, budget, f"{case.location}/run_result.json"),
             '<div class="part"><h4>Judges</h4>',
             _judges(results, judges, outcome, budget, "summary.json"), "</div>"]
    prompt = case.prompt
    if prompt is not None and prompt.text is not None:
        parts.append(f'<details class="part" open><summary><h4>Prompt</h4></summary>'
                     f"{pre(budget, prompt.text, PROMPT_CAP, prompt.path)}</details>")
    else:
        parts.append('<p class="muted">No prompt recorded (prompt.txt is missing).</p>')
    if case.input is not None and case.input.text is not None:
        parts.append(f'<details class="part"><summary><h4>Input <code>input.yaml</code></h4></summary>'
                     f"{pre(budget, case.input.text, PROMPT_CAP, case.input.path)}</details>")
    parts.append('<div class="part"><h4>Conversation</h4>')
    parts.append(_integrity(outcome))
    if case.events is not None and outcome is not None and outcome.steps:
        parts.append(_steps(outcome, case.events, budget, events_file))
    elif case.events is not None:
        parts.append(render_conversation(case.events, budget, events_file))
    if case.events_note:
        parts.append(f'<p class="muted">{esc(case.events_note)}</p>')
    if outcome is not None and outcome.result:
        parts.append(f'<div class="final"><div class="label">final result</div>'
                     f"{pre(budget, outcome.result, TEXT_CAP, f'{case.location}/run_result.json')}</div>")
    parts.append("</div>")
    parts.append(_outputs(case, budget))
    parts.append(_diff(case.diff, budget))
    parts.append(_where(case))
    parts.append("</article>")
    return "".join(parts)


def render_case_stub(case_id: str, outcome: CaseOutcome | None, results: Mapping[str, CaseResult],
                     judges: Mapping[str, JudgeStats], anchor: str, location: str, *,
                     offline: bool | None = None) -> str:
    """A case the page has no room for: how it ended and its verdicts, and where the rest is."""
    budget = Budget(20_000)
    return (f"{_head(case_id, outcome, results, anchor)}{_facts(outcome, offline)}"
            f"{_error(outcome, budget, f'{location}/run_result.json')}"
            f'<div class="part"><h4>Judges</h4>'
            f"{_judges(results, judges, outcome, budget, 'summary.json', cap=500)}</div>"
            '<div class="box box-warn">The report has no room left for this case\'s prompt, conversation and files'
            f" (it holds at most a few MB); they are in <code>{esc(location)}/</code> in the run directory.</div>"
            "</article>")
