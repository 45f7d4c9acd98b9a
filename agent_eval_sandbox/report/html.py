"""report.html: one self-contained page a person can read (pure).

Top to bottom: the run header (what ran, with what, banners for an
interrupted run or the tool's own failures, the thresholds verdict), failures
first (regressions, cases that did not complete, failing verdicts), the
thresholds and judges, every case at a glance, then each case in full.

The file works alone, e.g. uploaded as a CI artifact: no script, no external
asset and no link to a file next to it — what matters is embedded, cut to
size with a marker naming the file in the run directory that has the rest.
The page's size is bounded whatever the run: each case's detail has a budget,
the page has one, and cases past it get a stub (problem cases are given room
first). Every run value is untrusted and enters the page through `esc`; the
Content-Security-Policy forbids any script, so a `<script>` in an artifact is
shown, never run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from agent_eval_sandbox.compare.models import Comparison
from agent_eval_sandbox.judges.results import CaseResult
from agent_eval_sandbox.judges.verdict import fmt_number
from agent_eval_sandbox.report.failures import (
    failed_verdicts,
    is_completed,
    judged_incomplete,
    not_completed,
)
from agent_eval_sandbox.report.html_case import CASE_BUDGET, render_case, render_case_stub
from agent_eval_sandbox.report.html_compare import comparison_section, reward_section
from agent_eval_sandbox.report.html_parts import (
    badge,
    count,
    end_badge,
    esc,
    money,
    one_line,
    plural,
    rate,
    seconds,
    when,
)
from agent_eval_sandbox.report.html_style import STYLE
from agent_eval_sandbox.report.summary import Summary
from agent_eval_sandbox.report.view import CaseView, RunView
from agent_eval_sandbox.rundir.layout import CASES_DIR
from agent_eval_sandbox.rundir.models import CaseOutcome

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
PAGE_BUDGET = 6_000_000  # characters of case detail on the whole page
MAX_ROWS = 1000  # cases listed (tables, details); the rest are counted
MAX_FAILURE_ROWS = 300
_SHORT = 300  # a rationale or an error in a table


def _anchor(index: int) -> str:
    return f"case-{index}"


def _case_link(case_id: str, anchors: Mapping[str, str]) -> str:
    anchor = anchors.get(case_id)
    return f'<a href="#{anchor}">{esc(case_id)}</a>' if anchor else esc(case_id)


def _more(total: int, shown: int, what: str) -> str:
    if total <= shown:
        return ""
    return f'<p class="cut">… {count(total - shown)} more {esc(what)} not listed here; summary.json has every one.</p>'


# --- the header ---------------------------------------------------------------------------------------------


def _tokens(usage: Mapping[str, int]) -> str:
    def get(*names: str) -> int:
        return next((usage[n] for n in names if n in usage), 0)

    if not usage:
        return "—"
    parts = [(get("input_tokens", "input"), "in"), (get("output_tokens", "output"), "out"),
             (get("cache_read_input_tokens", "cache_read"), "cache read"),
             (get("cache_creation_input_tokens", "cache_create"), "cache write")]
    return " · ".join(f"{count(n)} {label}" for n, label in parts)


def _source(run: RunView) -> str:
    if run.offline is True:
        return "scripted — each case's model_script.yaml played by the scripted model server (offline)"
    if run.offline is False:
        return "live — the model API"
    return "unknown (run.json does not say)"


def _settings(run: RunView) -> str:
    settings = run.settings
    bits = [f"mode {run.mode}"] if run.mode else []
    if isinstance(settings.get("parallelism"), int):
        bits.append(f"parallelism {settings['parallelism']}")
    if isinstance(settings.get("timeout_s"), (int, float)):
        bits.append(f"timeout {fmt_number(settings['timeout_s'])} s")
    if isinstance(settings.get("max_budget_usd"), (int, float)):
        bits.append(f"budget ${settings['max_budget_usd']:g} per invocation")
    return " · ".join(bits) or "—"


def _case_counts(run: RunView, case_ids: Sequence[str],
                 outcomes: Mapping[str, CaseOutcome | None]) -> tuple[int, int, int]:
    """(planned, ran, completed)."""
    known = [outcomes.get(c) for c in case_ids]
    planned = max(run.planned or 0, len(case_ids))
    return planned, sum(1 for o in known if o is not None and o.ran), sum(1 for o in known if is_completed(o))


def _banners(summary: Summary, run: RunView, case_ids: Sequence[str],
             outcomes: Mapping[str, CaseOutcome | None]) -> str:
    banners = []
    planned, ran, completed = _case_counts(run, case_ids, outcomes)
    if run.interrupted:
        finished = run.finished if run.finished is not None else len([o for o in outcomes.values() if o is not None])
        banners.append(
            f'<div class="banner bad" id="interrupted">Interrupted: the run was stopped (Ctrl-C or SIGTERM) with'
            f" {count(finished)} of {count(planned)} planned cases finished; {count(max(0, planned - finished))}"
            " did not finish and count as not completed.</div>")
    elif not run.has_result:
        banners.append(
            '<div class="banner bad" id="interrupted">Unfinished run: it has no run_result.json (it was stopped or'
            " crashed before the end); what is shown is what its cases left.</div>")
    infra = [c for c in case_ids if (o := outcomes.get(c)) is not None and o.end_reason == "infra_error"]
    if infra:
        banners.append(
            f'<div class="banner infra" id="infra">Infrastructure errors: {plural(len(infra), "case")} failed because'
            " the tool's own plumbing failed (gateway, Docker, copying), not because of the skill; run again.</div>")
    if planned and completed == 0:
        banners.append(f'<div class="banner bad">No case completed: of {count(planned)} planned, {count(ran)} started'
                       " and none ended by itself. No verdict here says the skill works.</div>")
    for problem in run.problems:
        banners.append(f'<div class="banner warn">Part of the run could not be read: {esc(one_line(problem, 400))}'
                       "</div>")
    checks = summary.thresholds.checks
    failed = summary.thresholds.regressions
    if not summary.thresholds.config:
        banners.append('<div class="banner none">No thresholds configured: nothing gates this run.</div>')
    elif failed:
        banners.append(f'<div class="banner bad">REGRESSION: {len(failed)} of {len(checks)} threshold checks'
                       " failed</div>")
    else:
        banners.append(f'<div class="banner ok">All {len(checks)} threshold checks met</div>')
    return "".join(banners)


def _header(summary: Summary, run: RunView, case_ids: Sequence[str], outcomes: Mapping[str, CaseOutcome | None]) -> str:
    planned, ran, completed = _case_counts(run, case_ids, outcomes)
    cost = money(run.cost_usd)
    if run.offline and run.cost_usd is not None:
        cost += " scripted — priced from the usage the model scripts declare; nothing was billed"
    facts = [
        ("Model", f"<code>{esc(run.model or '—')}</code>"),
        ("Model source", esc(_source(run))),
        ("Claude Code", esc(run.claude_version or "—")),
        ("Sandbox image", f"<code>{esc(run.image or '—')}</code>"),
        ("Settings", esc(_settings(run))),
        ("Started", esc(when(run.started_at))),
        ("Wall clock", esc(seconds(run.wall_clock_s))),
        ("Cases", esc(f"{count(planned)} planned · {count(ran)} ran · {count(completed)} completed")),
        ("Tokens", esc(_tokens(run.token_usage))),
        ("Cost", esc(cost)),
        ("Judged", esc(summary.scored_at)),
        ("Run directory", f"<code>{esc(run.root)}</code>"),
    ]
    grid = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in facts)
    return (
        f'<header><h1>{esc(summary.title)}</h1>'
        f'<p class="sub">eval <b>{esc(run.eval or summary.eval)}</b> · run <code>{esc(run.run_id)}</code></p>'
        f"{_banners(summary, run, case_ids, outcomes)}<dl class=\"grid\">{grid}</dl>"
        '<nav><a href="#failures">Failures</a><a href="#thresholds">Thresholds</a><a href="#judges">Judges</a>'
        '<a href="#cases">Cases</a><a href="#details">Case details</a></nav></header>'
    )


# --- failures first -----------------------------------------------------------------------------------------


def _regressions(summary: Summary) -> str:
    failed = summary.thresholds.regressions
    if not failed:
        return ""
    rows = "".join(
        f"<tr><td>{esc(c.judge)}</td><td><code>{esc(c.key)}</code></td><td class=\"num\">{esc(c.expected)}</td>"
        f"<td class=\"num\">{esc(c.actual_text)}</td><td>{esc(c.detail)}</td></tr>"
        for c in failed
    )
    return (f"<h3>Threshold regressions · {len(failed)}</h3><table><thead><tr><th>Judge</th><th>Gate</th>"
            f"<th>Expected</th><th>Actual</th><th>Detail</th></tr></thead><tbody>{rows}</tbody></table>")


def _not_completed_table(ids: Sequence[str], outcomes: Mapping[str, CaseOutcome | None],
                         anchors: Mapping[str, str]) -> str:
    if not ids:
        return ""
    rows = []
    for case_id in ids[:MAX_FAILURE_ROWS]:
        outcome = outcomes.get(case_id)
        reason = "—" if outcome is None else outcome.end_reason
        exit_code = "—" if outcome is None or outcome.exit_code is None else outcome.exit_code
        error = (outcome.error if outcome is not None else None) or ("" if outcome is not None else
                                                                     "no run_result.json for this case")
        rows.append(f"<tr><td>{_case_link(case_id, anchors)}</td><td>{end_badge(outcome)}</td>"
                    f"<td><code>{esc(reason)}</code></td><td class=\"num\">{esc(exit_code)}</td>"
                    f"<td>{esc(one_line(error, _SHORT)) or '<span class=muted>—</span>'}</td></tr>")
    return (f"<h3>Cases that did not complete · {count(len(ids))}</h3><p class=\"muted\">Their agent did not end by"
            " itself; any verdict on them judged only what they left and is marked <span class=\"badge inc\">"
            "incomplete</span>.</p><table><thead><tr><th>Case</th><th>Status</th><th>End reason</th><th>Exit</th>"
            f"<th>Error</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"{_more(len(ids), MAX_FAILURE_ROWS, 'cases')}")


def _failed_table(summary: Summary, outcomes: Mapping[str, CaseOutcome | None], anchors: Mapping[str, str]) -> str:
    failed = failed_verdicts(summary)
    if not failed:
        return ""
    rows = []
    for item in failed[:MAX_FAILURE_ROWS]:
        result = item.result
        text = (result.error if result.status in ("error", "not_run") else result.rationale) or "(no rationale)"
        incomplete = judged_incomplete(result, outcomes.get(item.case_id))
        rows.append(f"<tr><td>{_case_link(item.case_id, anchors)}</td><td>{esc(item.judge)}</td>"
                    f"<td>{badge(result, summary.judges.get(item.judge), incomplete=incomplete)}</td>"
                    f"<td>{esc(item.why)}</td><td>{esc(one_line(text, _SHORT))}</td></tr>")
    return (f"<h3>Failing verdicts · {count(len(failed))}</h3><table><thead><tr><th>Case</th><th>Judge</th>"
            f"<th>Result</th><th>Why</th><th>Rationale</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"{_more(len(failed), MAX_FAILURE_ROWS, 'failing verdicts')}")


def _failures_section(summary: Summary, case_ids: Sequence[str], outcomes: Mapping[str, CaseOutcome | None],
                      anchors: Mapping[str, str]) -> str:
    body = (_regressions(summary) + _not_completed_table(not_completed(case_ids, outcomes), outcomes, anchors)
            + _failed_table(summary, outcomes, anchors))
    if not body:
        body = '<p class="banner ok">Nothing failed: every case completed and every verdict passed.</p>'
    return f'<section id="failures"><h2>Failures first</h2>{body}</section>'


# --- the run at a glance ------------------------------------------------------------------------------------


def _thresholds_section(summary: Summary) -> str:
    checks = summary.thresholds.checks
    if not checks:
        return '<section id="thresholds"><h2>Thresholds</h2><p class="muted">None configured.</p></section>'
    rows = "".join(
        f"<tr><td>{esc(c.judge)}</td><td><code>{esc(c.key)}</code></td><td class=\"num\">{esc(c.expected)}</td>"
        f"<td class=\"num\">{esc(c.actual_text)}</td>"
        f"<td><span class=\"badge {'pass' if c.passed else 'fail'}\">{'met' if c.passed else 'REGRESSION'}</span></td>"
        f"<td>{esc(c.detail)}</td></tr>"
        for c in checks
    )
    return (
        '<section id="thresholds"><h2>Thresholds</h2><table><thead><tr><th>Judge</th><th>Gate</th>'
        "<th>Expected</th><th>Actual</th><th>Result</th><th>Detail</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _judges_section(summary: Summary) -> str:
    rows = []
    for name, stats in summary.judges.items():
        if stats.pass_rate is not None:
            headline = f"pass rate {rate(stats.pass_rate)}"
        elif stats.mean is not None:
            scale = ""
            if stats.score_range:
                scale = f" on [{fmt_number(stats.score_range[0])}, {fmt_number(stats.score_range[1])}]"
            headline = f"mean {stats.mean:.3g}{scale}"
        else:
            headline = "—"
        spread = stats.stability
        stability = f"{spread.stable_cases}/{spread.total_cases} stable over {spread.samples} samples" if spread else ""
        status_css = {"OK": "pass", "ERROR": "error", "SKIP": "skip"}[stats.status]
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(stats.judge_type)}</td>"
            f'<td><span class="badge {status_css}">{esc(stats.status)}</span></td><td>{esc(headline)}</td>'
            f'<td class="num">{stats.scored_cases}</td><td class="num">{stats.errored_cases}</td>'
            f'<td class="num">{stats.skipped_cases}</td><td class="num">{esc(rate(stats.error_rate))}</td>'
            f"<td>{esc(stability)}</td></tr>"
        )
    if not rows:
        return ('<section id="judges"><h2>Judges</h2><p class="banner warn">No judges ran: nothing was checked.</p>'
                "</section>")
    return (
        '<section id="judges"><h2>Judges</h2><table><thead><tr><th>Judge</th><th>Type</th><th>Status</th>'
        "<th>Result</th><th>Scored</th><th>Errored</th><th>Skipped</th><th>Error rate</th><th>Stability</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _cases_section(summary: Summary, case_ids: Sequence[str], outcomes: Mapping[str, CaseOutcome | None],
                   anchors: Mapping[str, str], offline: bool | None) -> str:
    judge_names = list(summary.judges)
    head = "".join(f"<th>{esc(name)}</th>" for name in judge_names)
    rows = []
    for case_id in case_ids[:MAX_ROWS]:
        outcome = outcomes.get(case_id)
        results: Mapping[str, CaseResult] = summary.per_case.get(case_id, {})
        cells = "".join(
            f"<td>{badge(r, summary.judges.get(n), incomplete=r is not None and judged_incomplete(r, outcome))}</td>"
            for n in judge_names for r in [results.get(n)]
        )
        cost = money(outcome.cost_usd) if outcome else "—"
        rows.append(
            f"<tr><td>{_case_link(case_id, anchors)}</td><td>{end_badge(outcome)}</td>"
            f'<td class="num">{esc("—" if outcome is None or outcome.exit_code is None else outcome.exit_code)}</td>'
            f'<td class="num">{esc(seconds(outcome.duration_s if outcome else None))}</td>'
            f'<td class="num">{esc(cost)}</td>'
            f'<td class="num">{esc("—" if outcome is None or outcome.num_turns is None else outcome.num_turns)}</td>'
            f"{cells}</tr>"
        )
    scripted = " (scripted)" if offline else ""
    return (
        f'<section id="cases"><h2>Cases · {count(len(case_ids))}</h2><table class="cases"><thead><tr><th>Case</th>'
        f"<th>Status</th><th>Exit</th><th>Duration</th><th>Cost{scripted}</th><th>Turns</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{_more(len(case_ids), MAX_ROWS, 'cases')}</section>"
    )


# --- every case in full -------------------------------------------------------------------------------------


def _details_section(summary: Summary, run: RunView, case_ids: Sequence[str],
                     outcomes: Mapping[str, CaseOutcome | None], anchors: Mapping[str, str],
                     load_case: Callable[[str], CaseView], page_budget: int, case_budget: int) -> str:
    listed = list(case_ids[:MAX_ROWS])
    problems = set(not_completed(listed, outcomes)) | {f.case_id for f in failed_verdicts(summary)}
    # Problem cases get room first; the page still lists every case in order.
    by_priority = sorted(listed, key=lambda c: c not in problems)
    rendered: dict[str, str] = {}
    left = page_budget
    for case_id in by_priority:
        if left <= 0:
            break
        markup = render_case(load_case(case_id), summary.per_case.get(case_id, {}), summary.judges, anchors[case_id],
                             offline=run.offline, budget_chars=min(case_budget, left))
        rendered[case_id] = markup
        left -= len(markup)
    articles = [
        rendered.get(case_id) or render_case_stub(
            case_id, outcomes.get(case_id), summary.per_case.get(case_id, {}), summary.judges, anchors[case_id],
            f"{CASES_DIR}/{case_id}", offline=run.offline)
        for case_id in listed
    ]
    batch = ""
    if run.batch is not None:
        batch = ('<h3>The batch invocation</h3><p class="muted">In batch mode one agent session handles every case;'
                 " its conversation is shown once here.</p>"
                 + render_case(run.batch, {}, summary.judges, "batch", offline=run.offline, budget_chars=case_budget))
    return (f'<section id="details"><h2>Case details</h2>{batch}{"".join(articles)}'
            f"{_more(len(case_ids), len(listed), 'cases')}</section>")


def _order(summary: Summary, outcomes: Mapping[str, CaseOutcome | None]) -> list[str]:
    """The judged cases in the summary's order, then any the run knows of that were not judged."""
    ids = list(summary.per_case)
    seen = set(ids)
    return ids + [c for c in outcomes if c not in seen]


def render_html(summary: Summary, run: RunView, outcomes: Mapping[str, CaseOutcome | None],
                load_case: Callable[[str], CaseView], *, page_budget: int = PAGE_BUDGET,
                case_budget: int = CASE_BUDGET, comparison: Comparison | None = None) -> str:
    """The whole report page. `outcomes` holds every case the run knows of (None: no record);
    `load_case` gives a case's material, asked for only for the cases the page has room for;
    `comparison` is the run's comparison with a baseline, if it has one."""
    case_ids = _order(summary, outcomes)
    anchors = {case_id: _anchor(index) for index, case_id in enumerate(case_ids[:MAX_ROWS], start=1)}
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(summary.title)} — {esc(summary.eval)} {esc(run.run_id)}</title>"
        f"<style>{STYLE}</style></head><body>"
        f"{_header(summary, run, case_ids, outcomes)}<main>"
        f"{_failures_section(summary, case_ids, outcomes, anchors)}"
        f"{_thresholds_section(summary)}{_judges_section(summary)}"
        f"{comparison_section(comparison, anchors)}{reward_section(summary, anchors)}"
        f"{_cases_section(summary, case_ids, outcomes, anchors, run.offline)}"
        f"{_details_section(summary, run, case_ids, outcomes, anchors, load_case, page_budget, case_budget)}"
        "</main>"
        f'<footer class="muted"><p>Generated by agent-eval-sandbox. This page embeds the start of each case\'s'
        f" files; the run directory <code>{esc(run.root)}</code> has them whole: <code>cases/&lt;case-id&gt;/</code>"
        " (stdout.log, events.json, transcript.jsonl, gateway.jsonl, workspace.diff, collected outputs), and"
        " run.json, run_result.json, summary.json at its root.</p></footer>"
        "</body></html>\n"
    )
