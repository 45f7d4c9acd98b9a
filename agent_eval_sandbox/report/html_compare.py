"""report.html's reward overview and baseline comparison sections (pure).

Like the rest of the page: every value from a run enters through `esc`, long
lists are capped with a count of what is left out, and nothing links outside
the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent_eval_sandbox.compare.models import CaseValues, Comparison, JudgeComparison, PairwiseSummary
from agent_eval_sandbox.judges.reward import HISTOGRAM_BINS, RewardSummary, judge_value
from agent_eval_sandbox.report.html_parts import count, esc, fmt_value, one_line, rate
from agent_eval_sandbox.report.summary import Summary

MAX_ROWS = 1000
MAX_CASE_ROWS = 300
_SHORT = 300

_VERDICT_CSS = {"regressed": "fail", "improved": "pass", "no significant change": "skip", "not compared": "skip"}
_WINNER = {"A": ("run", "pass"), "B": ("baseline", "fail"), "tie": ("tie", "skip"), "error": ("error", "error"),
           "not_run": ("not run", "interrupted")}


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _signed(value: float | None, as_rate: bool) -> str:
    if value is None:
        return "—"
    return f"{value:+.1%}" if as_rate else f"{value:+.3g}"


def _more(total: int, shown: int, what: str, where: str) -> str:
    if total <= shown:
        return ""
    return f'<p class="cut">… {count(total - shown)} more {esc(what)} not listed here; {esc(where)} has every one.</p>'


def _link(case_id: str, anchors: Mapping[str, str]) -> str:
    anchor = anchors.get(case_id)
    return f'<a href="#{anchor}">{esc(case_id)}</a>' if anchor else esc(case_id)


# --- reward -------------------------------------------------------------------------------------------------


def _histogram(reward: RewardSummary) -> str:
    if not reward.histogram or not any(reward.histogram):
        return ""
    cells = "".join(
        f'<td class="num">{count(n)}</td>' for n in reward.histogram
    )
    head = "".join(f"<th>{i / HISTOGRAM_BINS:.1f}–{(i + 1) / HISTOGRAM_BINS:.1f}</th>"
                   for i in range(len(reward.histogram)))
    return f"<table><thead><tr><th>Reward</th>{head}</tr></thead><tbody><tr><th>Cases</th>{cells}</tr></tbody></table>"


def reward_section(summary: Summary, anchors: Mapping[str, str]) -> str:
    """Each case's reward and every judge's value beside it, with the run's mean and distribution."""
    reward = summary.reward
    if reward is None:
        return ""
    judges = list(summary.judges)
    head = "".join(f"<th>{esc(name)}</th>" for name in judges)
    rows = []
    for case_id, case_reward in list(reward.per_case.items())[:MAX_ROWS]:
        results = summary.per_case.get(case_id, {})
        cells = "".join(f'<td class="num">{esc(fmt_value(judge_value(results.get(n))))}</td>' for n in judges)
        note = one_line(case_reward.note, _SHORT) if case_reward.note else ""
        rows.append(f'<tr><td>{_link(case_id, anchors)}</td><td class="num"><b>{case_reward.reward:.3f}</b></td>'
                    f"{cells}<td>{esc(note)}</td></tr>")
    stats = (f"mean {_num(reward.mean)} · median {_num(reward.median)} · min {_num(reward.min)} · "
             f"max {_num(reward.max)} · sd {_num(reward.stdev)} over {count(reward.cases)} cases")
    never = f"; {count(reward.not_run)} never ran and get 0.0" if reward.not_run else ""
    return (
        f'<section id="reward"><h2>Reward</h2><p>Composed per case as <code>reward:</code> says '
        f"(mode <code>{esc(reward.mode)}</code>, gate {'on' if reward.gate else 'off'}): {esc(stats)}{esc(never)}."
        " Each case's value is also in <code>cases/&lt;id&gt;/reward.json</code>.</p>"
        f"{_histogram(reward)}"
        f"<table><thead><tr><th>Case</th><th>Reward</th>{head}<th>Note</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{_more(len(reward.per_case), MAX_ROWS, 'cases', 'summary.json')}"
        "</section>"
    )


# --- comparison ---------------------------------------------------------------------------------------------


def _judge_row(name: str, judge: JudgeComparison) -> str:
    as_rate = judge.metric == "pass_rate"
    show = rate if as_rate else _num
    interval = "—"
    if judge.ci_low is not None and judge.ci_high is not None:
        interval = f"[{judge.ci_low:+.3g}, {judge.ci_high:+.3g}]"
    p_value = "—" if judge.p_value is None else f"{judge.p_value:.3g}"
    notes = []
    if judge.errored_a or judge.errored_b:
        notes.append(f"judge errors (counted as failing): {judge.errored_a} in the run, {judge.errored_b} in the "
                     "baseline")
    if judge.not_run_a or judge.not_run_b:
        notes.append(f"never ran (counted as failing): {judge.not_run_a} in the run, {judge.not_run_b} in the baseline")
    if judge.incomplete_a or judge.incomplete_b:
        notes.append(f"incomplete: {judge.incomplete_a} in the run, {judge.incomplete_b} in the baseline")
    if judge.unpaired:
        notes.append(f"{count(len(judge.unpaired))} case(s) unpaired (skipped or judge error)")
    if not judge.in_a or not judge.in_b:
        notes.append("only in the run" if judge.in_a else "only in the baseline")
    return (
        f"<tr><td>{esc(name)}</td><td><code>{esc(judge.metric or '—')}</code></td>"
        f'<td class="num">{esc(show(judge.b))}</td><td class="num">{esc(show(judge.a))}</td>'
        f'<td class="num">{esc(_signed(judge.delta, as_rate))}</td><td class="num">{judge.n}</td>'
        f'<td class="num">{esc(f"+{judge.better} / −{judge.worse} / ={judge.same}")}</td>'
        f'<td class="num">{esc(_num(judge.mean_delta))}</td><td class="num">{esc(interval)}</td>'
        f'<td class="num">{esc(p_value)}</td>'
        f'<td><span class="badge {_VERDICT_CSS[judge.verdict]}">{esc(judge.verdict)}</span></td>'
        f"<td>{esc('; '.join(notes))}</td></tr>"
    )


def _changed_rows(comparison: Comparison, anchors: Mapping[str, str]) -> str:
    rows: list[tuple[str, str, CaseValues]] = [
        (name, judge.metric or "", values) for name, judge in comparison.judges.items() for values in judge.changed]
    if not rows:
        return '<p class="muted">No case changed its value between the two runs.</p>'
    body = "".join(
        f"<tr><td>{_link(v.case, anchors)}</td><td>{esc(name)}</td><td class=\"num\">{esc(fmt_value(v.b))}</td>"
        f'<td class="num">{esc(fmt_value(v.a))}</td></tr>'
        for name, _, v in rows[:MAX_CASE_ROWS]
    )
    return ("<table><thead><tr><th>Case</th><th>Judge</th><th>Baseline</th><th>Run</th></tr></thead>"
            f"<tbody>{body}</tbody></table>{_more(len(rows), MAX_CASE_ROWS, 'changes', 'comparison.json')}")


def _pairwise(pairwise: PairwiseSummary | None, anchors: Mapping[str, str]) -> str:
    if pairwise is None:
        return ""
    rows = []
    for case in pairwise.per_case[:MAX_CASE_ROWS]:
        label, css = _WINNER[case.winner]
        orders = f"{case.pref_ab or '—'} / {case.pref_ba or '—'}"
        mark = ' <span class="badge inc">incomplete</span>' if case.incomplete else ""
        rows.append(f"<tr><td>{_link(case.case_id, anchors)}</td><td><span class=\"badge {css}\">{esc(label)}"
                    f"</span>{mark}</td><td class=\"num\">{esc(orders)}</td>"
                    f"<td>{esc(one_line(case.reasoning, _SHORT))}</td></tr>")
    win_rate = rate(pairwise.win_rate)
    return (
        f"<h3>Pairwise judge <code>{esc(pairwise.judge)}</code></h3>"
        f"<p>Each case judged twice, the outputs swapped the second time; a side wins only when preferred both"
        f" ways. Run <b>{count(pairwise.wins_a)}</b> wins, baseline {count(pairwise.wins_b)}, {count(pairwise.ties)}"
        f" ties, {count(pairwise.errors)} errors, {count(pairwise.not_run)} not run: win rate {esc(win_rate)} over"
        f" {count(pairwise.cases_compared)} cases (model {esc(pairwise.model or '—')}).</p>"
        "<table><thead><tr><th>Case</th><th>Winner</th><th>Run first / baseline first</th><th>Reasoning</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
        f"{_more(len(pairwise.per_case), MAX_CASE_ROWS, 'cases', 'comparison.json')}"
    )


def _case_list(ids: Sequence[str], what: str) -> str:
    if not ids:
        return ""
    shown = ", ".join(esc(c) for c in ids[:50])
    more = f", … (+{count(len(ids) - 50)})" if len(ids) > 50 else ""
    return f"<p>{count(len(ids))} case(s) only in {esc(what)}, not compared: {shown}{esc(more)}</p>"


def comparison_section(comparison: Comparison | None, anchors: Mapping[str, str]) -> str:
    """The run against its baseline: per-judge deltas and their statistics, changed cases, the pairwise judge."""
    if comparison is None:
        return ""
    regressed = comparison.regressed
    banner = (f'<div class="banner bad">Regressed against the baseline: {esc(", ".join(regressed))}</div>'
              if regressed else '<div class="banner ok">No judge regressed against the baseline.</div>')
    rows = "".join(_judge_row(name, judge) for name, judge in comparison.judges.items())
    warnings = "".join(f'<div class="banner warn">{esc(one_line(w, 400))}</div>' for w in comparison.warnings)
    return (
        f'<section id="comparison"><h2>Comparison with the baseline</h2>'
        f"<p>This run (<code>{esc(comparison.run_a.run_id)}</code>) against the baseline"
        f" <code>{esc(comparison.run_b.run_id)}</code> ({esc(comparison.run_b.root)}), compared"
        f" {esc(comparison.compared_at)}: {count(comparison.paired_cases)} cases paired by id. Δ is run − baseline."
        f" A judge regressed when its aggregate dropped by more than {comparison.tolerance:g} or the paired"
        f" sign-flip test finds it worse at α = {comparison.alpha:g}; the interval is the"
        f" {comparison.confidence:.0%} Student-t interval of the mean paired difference. A case that never ran"
        " counts as failing.</p>"
        f"{banner}{warnings}"
        "<table><thead><tr><th>Judge</th><th>Metric</th><th>Baseline</th><th>Run</th><th>Δ</th><th>Paired</th>"
        "<th>Better / worse / same</th><th>Mean Δ</th><th>CI</th><th>p</th><th>Verdict</th><th>Notes</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
        f"{_case_list(comparison.only_in_a, 'this run')}{_case_list(comparison.only_in_b, 'the baseline')}"
        f"<h3>Cases that changed</h3>{_changed_rows(comparison, anchors)}"
        f"{_pairwise(comparison.pairwise, anchors)}</section>"
    )
