"""report.html: one self-contained page a person can read (pure).

No external assets and no script at all. Every piece of run data — case ids,
rationales, file names, model text — is untrusted and goes through `_e`
(HTML-escaped, quotes included); the Content-Security-Policy additionally
forbids any script, so a `<script>` in an artifact is shown, never run.
Links to case logs are relative, so the report works wherever the run
directory is moved or served.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from agent_eval_sandbox.judges.results import CaseResult, JudgeStats, Value
from agent_eval_sandbox.judges.verdict import fmt_number
from agent_eval_sandbox.report.facts import CaseFacts, Link
from agent_eval_sandbox.report.summary import Summary

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_STYLE = """
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --muted: #656d76; --line: #d0d7de; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 24px;
       max-width: 1400px; color: #1f2328; }
h1 { margin: 0 0 4px; font-size: 24px; } h2 { margin: 28px 0 8px; font-size: 18px; }
h3 { margin: 0 0 6px; font-size: 16px; }
.meta, .muted { color: var(--muted); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.banner { padding: 10px 14px; border-radius: 6px; font-weight: 600; margin: 12px 0; }
.banner.ok { background: #dafbe1; color: var(--ok); } .banner.bad { background: #ffebe9; color: var(--bad); }
.banner.none { background: var(--bg); color: var(--muted); }
.badge { display: inline-block; min-width: 3.2em; padding: 1px 6px; border-radius: 10px; font-size: 12px;
         font-weight: 600; text-align: center; }
.pass, .good { background: #dafbe1; color: var(--ok); } .fail, .bad { background: #ffebe9; color: var(--bad); }
.mid { background: #fff8c5; color: var(--warn); } .error { background: #fbefff; color: #8250df; }
.skip, .neutral { background: var(--bg); color: var(--muted); }
.links a { margin-right: 8px; white-space: nowrap; }
article.case { border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; margin: 12px 0; }
.judge { margin: 10px 0 0; } .judge h4 { margin: 0 0 4px; font-size: 14px; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--bg); border-radius: 4px; padding: 8px;
      margin: 4px 0; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; max-height: 28em; overflow: auto; }
details summary { cursor: pointer; color: var(--muted); }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt_value(value: Value | None) -> str:
    if isinstance(value, bool):
        return "PASS" if value else "FAIL"
    if value is None:
        return "—"
    return fmt_number(value) if float(value).is_integer() else f"{value:.3g}"


def _band(value: float, score_range: tuple[float, float] | None) -> str:
    """Colour of a score on its declared scale; neutral without one."""
    if score_range is None or score_range[1] <= score_range[0]:
        return "neutral"
    position = (value - score_range[0]) / (score_range[1] - score_range[0])
    return "good" if position >= 0.75 else "mid" if position >= 0.5 else "bad"


def _badge(result: CaseResult | None, stats: JudgeStats | None) -> str:
    if result is None:
        return '<span class="badge skip">—</span>'
    if result.status == "error":
        return '<span class="badge error">ERROR</span>'
    if result.status == "not_run":  # the case never ran: never a pass, whatever it left
        return '<span class="badge error">NOT RUN</span>'
    if result.status == "skipped":
        return '<span class="badge skip">SKIP</span>'
    value = result.value
    if isinstance(value, bool):
        css = "pass" if value else "fail"
    else:
        css = _band(float(value), stats.score_range if stats else None) if value is not None else "neutral"
    return f'<span class="badge {css}">{_e(_fmt_value(value))}</span>'


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _links(links: Sequence[Link]) -> str:
    if not links:
        return '<span class="muted">none</span>'
    return "".join(f'<a href="{_e(link.href)}">{_e(link.label)}</a>' for link in links)


def _banner(summary: Summary) -> str:
    checks = summary.thresholds.checks
    failed = summary.thresholds.regressions
    if not summary.thresholds.config:
        return '<p class="banner none">No thresholds configured</p>'
    if failed:
        return f'<p class="banner bad">REGRESSION: {len(failed)} of {len(checks)} threshold checks failed</p>'
    return f'<p class="banner ok">All {len(checks)} threshold checks met</p>'


def _thresholds_section(summary: Summary) -> str:
    checks = summary.thresholds.checks
    if not checks:
        return ""
    rows = "".join(
        f"<tr><td>{_e(c.judge)}</td><td><code>{_e(c.key)}</code></td><td class=\"num\">{_e(c.expected)}</td>"
        f"<td class=\"num\">{_e(c.actual_text)}</td>"
        f"<td><span class=\"badge {'pass' if c.passed else 'fail'}\">{'met' if c.passed else 'REGRESSION'}</span></td>"
        f"<td>{_e(c.detail)}</td></tr>"
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
            headline = f"pass rate {_rate(stats.pass_rate)}"
        elif stats.mean is not None:
            scale = ""
            if stats.score_range:
                scale = f" on [{fmt_number(stats.score_range[0])}, {fmt_number(stats.score_range[1])}]"
            headline = f"mean {stats.mean:.3g}{scale}"
        else:
            headline = "—"
        stability = (
            f"{stats.stability.stable_cases}/{stats.stability.total_cases} stable"
            f" over {stats.stability.samples} samples"
            if stats.stability
            else ""
        )
        status_css = {"OK": "pass", "ERROR": "error", "SKIP": "skip"}[stats.status]
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{_e(stats.judge_type)}</td>"
            f'<td><span class="badge {status_css}">{_e(stats.status)}</span></td><td>{_e(headline)}</td>'
            f'<td class="num">{stats.scored_cases}</td><td class="num">{stats.errored_cases}</td>'
            f'<td class="num">{stats.skipped_cases}</td><td class="num">{_e(_rate(stats.error_rate))}</td>'
            f"<td>{_e(stability)}</td></tr>"
        )
    return (
        '<section id="judges"><h2>Judges</h2><table><thead><tr><th>Judge</th><th>Type</th><th>Status</th>'
        "<th>Result</th><th>Scored</th><th>Errored</th><th>Skipped</th><th>Error rate</th><th>Stability</th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _cases_section(summary: Summary, facts: Mapping[str, CaseFacts], anchors: Mapping[str, str]) -> str:
    judge_names = list(summary.judges)
    head = "".join(f"<th>{_e(name)}</th>" for name in judge_names)
    rows = []
    for case_id, results in summary.per_case.items():
        fact = facts.get(case_id, CaseFacts())
        cells = "".join(f"<td>{_badge(results.get(n), summary.judges.get(n))}</td>" for n in judge_names)
        rows.append(
            f'<tr><td><a href="#{anchors[case_id]}">{_e(case_id)}</a></td><td>{_e(fact.end_reason or "unknown")}</td>'
            f'<td class="num">{_e("—" if fact.exit_code is None else fact.exit_code)}</td>'
            f'<td class="num">{_e(_seconds(fact.duration_s))}</td><td class="num">{_e(_money(fact.cost_usd))}</td>'
            f'<td class="num">{_e("—" if fact.num_turns is None else fact.num_turns)}</td>'
            f'{cells}<td class="links">{_links(fact.links)}</td></tr>'
        )
    return (
        '<section id="cases"><h2>Cases</h2><table><thead><tr><th>Case</th><th>End</th><th>Exit</th>'
        f"<th>Duration</th><th>Cost</th><th>Turns</th>{head}<th>Logs</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _samples_table(result: CaseResult) -> str:
    if not result.sample_rationales:
        return ""
    rows = "".join(
        f"<tr><td class=\"num\">{i}</td><td>{_e(_fmt_value(s.value) if s.error is None else 'ERROR')}</td>"
        f"<td><pre>{_e(s.error or s.rationale)}</pre></td></tr>"
        for i, s in enumerate(result.sample_rationales, start=1)
    )
    return (
        f"<details><summary>{len(result.sample_rationales)} samples</summary><table><thead><tr><th>#</th>"
        f"<th>Value</th><th>Rationale</th></tr></thead><tbody>{rows}</tbody></table></details>"
    )


def _judge_block(name: str, result: CaseResult, stats: JudgeStats | None) -> str:
    text = result.error if result.status in ("error", "not_run") else result.rationale
    stability = ""
    if result.stability is not None:
        s = result.stability
        stability = f' <span class="muted">({"stable" if s.stable else "unstable"} over {s.samples} samples)</span>'
    return (
        f'<div class="judge"><h4>{_e(name)} {_badge(result, stats)}{stability}</h4>'
        f"<pre>{_e(text or '(no rationale)')}</pre>{_samples_table(result)}</div>"
    )


def _details_section(summary: Summary, facts: Mapping[str, CaseFacts], anchors: Mapping[str, str]) -> str:
    articles = []
    for case_id, results in summary.per_case.items():
        fact = facts.get(case_id, CaseFacts())
        blocks = "".join(_judge_block(n, r, summary.judges.get(n)) for n, r in results.items())
        articles.append(
            f'<article class="case" id="{anchors[case_id]}"><h3>{_e(case_id)}</h3>'
            f'<p class="muted">end: {_e(fact.end_reason or "unknown")}'
            f' · exit {_e("—" if fact.exit_code is None else fact.exit_code)}'
            f" · {_e(_seconds(fact.duration_s))} · {_e(_money(fact.cost_usd))}</p>"
            f'<p class="links">{_links(fact.links)}</p>{blocks}</article>'
        )
    return f'<section id="details"><h2>Case details</h2>{"".join(articles)}</section>'


def render_html(summary: Summary, facts: Mapping[str, CaseFacts], run_links: Sequence[Link] = ()) -> str:
    """The whole report page."""
    anchors = {case_id: f"case-{index}" for index, case_id in enumerate(summary.per_case, start=1)}
    total_cost = sum(f.cost_usd for f in facts.values() if f.cost_usd is not None)
    meta = (
        f"eval <b>{_e(summary.eval)}</b> · run <code>{_e(summary.run_id)}</code> · judged {_e(summary.scored_at)}"
        f" · {len(summary.per_case)} cases · {len(summary.judges)} judges · total cost {_e(_money(total_cost))}"
    )
    run_level = f'<p class="links">run files: {_links(run_links)}</p>' if run_links else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(summary.title)} — {_e(summary.eval)} {_e(summary.run_id)}</title>"
        f"<style>{_STYLE}</style></head><body>"
        f'<header><h1>{_e(summary.title)}</h1><p class="meta">{meta}</p>{_banner(summary)}{run_level}</header>'
        f"{_thresholds_section(summary)}{_judges_section(summary)}"
        f"{_cases_section(summary, facts, anchors)}{_details_section(summary, facts, anchors)}"
        '<footer class="muted"><p>generated by agent-eval-sandbox</p></footer>'
        "</body></html>\n"
    )
