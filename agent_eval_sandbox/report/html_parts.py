"""The small pieces report.html is made of (pure): escaping, cutting to size, numbers, badges.

Every value from a run is untrusted. `esc` is the only way text enters the
page: HTML-escaped (quotes included), and made visible where a browser would
hide or misread it — a name that is not UTF-8 (carried as lone surrogates)
shows its bytes as `\\xNN`, control characters and bidirectional overrides
show as escapes, so a case id cannot spoof another or break the file.
"""

from __future__ import annotations

import html
import re
import time

from agent_eval_sandbox.judges.results import CaseResult, JudgeStats, Value
from agent_eval_sandbox.judges.verdict import fmt_number
from agent_eval_sandbox.rundir.models import CaseOutcome

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0/C1 controls but tab and newline, and the bidirectional controls ("Trojan Source").
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Where a cut of escaped text may not fall: inside an entity such as `&amp;`.
_OPEN_ENTITY = re.compile(r"&[#\w]{0,8}$")


def _surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _invisible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """The text with what a reader could not see (or a browser would garble) written as escapes."""
    text = text.replace("\r\n", "\n")
    return _INVISIBLE.sub(_invisible, _SURROGATE.sub(_surrogate, text))


def esc(value: object) -> str:
    return html.escape(visible("" if value is None else str(value)), quote=True)


def clip(text: str, cap: int) -> tuple[str, int]:
    """(the first `cap` characters, how many were left out)."""
    cap = max(0, cap)
    return (text, 0) if len(text) <= cap else (text[:cap], len(text) - cap)


def one_line(text: str | None, cap: int = 240) -> str:
    """Text squeezed onto one line and shortened (with …), for tables and summaries."""
    line = " ".join((text or "").split())
    return line if len(line) <= cap else line[: max(0, cap - 1)] + "…"


def cut_escaped(markup: str, limit: int) -> str:
    """Escaped text cut to `limit` characters, never inside an entity."""
    if len(markup) <= limit:
        return markup
    head = markup[: max(0, limit)]
    return _OPEN_ENTITY.sub("", head)


class Budget:
    """Characters of HTML a part of the page may still use; pieces take from it until it is spent.

    Each piece is cut to what is left (and to its own cap), so a part of the page
    overruns its budget by at most one piece's markup.
    """

    def __init__(self, chars: int) -> None:
        self.left = chars

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def take(self, markup: str) -> str:
        self.left -= len(markup)
        return markup

    def text(self, text: str, cap: int) -> tuple[str, int]:
        """`text` escaped and cut to its cap and to what is left: (markup, characters left out)."""
        shown, omitted = clip(text, min(cap, max(0, self.left)))
        markup = esc(shown)
        if len(markup) > self.left:
            markup = cut_escaped(markup, max(0, self.left))
            omitted = max(0, len(text) - len(html.unescape(markup)))
        self.left -= len(markup)
        return markup, omitted


def cut_note(omitted: int, where: str, unit: str = "characters") -> str:
    if omitted <= 0:
        return ""
    return (f'<div class="cut">… {count(omitted)} more {esc(unit)} not shown here;'
            f" the whole text is in <code>{esc(where)}</code> in the run directory</div>")


def pre(budget: Budget, text: str, cap: int, where: str, css: str = "") -> str:
    markup, omitted = budget.text(text, cap)
    attr = f' class="{css}"' if css else ""
    return f"<pre{attr}>{markup}</pre>{cut_note(omitted, where)}"


def count(value: int | float) -> str:
    return f"{value:,}"


def plural(number: int, noun: str) -> str:
    return f"{count(number)} {noun}{'' if number == 1 else 's'}"


def money(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 120:
        minutes, rest = divmod(value, 60)
        return f"{int(minutes)} min {rest:.0f} s"
    return f"{value:.1f} s"


def rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def size(value: int) -> str:
    if value < 1024:
        return f"{value} B"
    if value < 1024 * 1024:
        return f"{value / 1024:.1f} KiB"
    return f"{value / 1024 / 1024:.1f} MiB"


def when(epoch: float | None) -> str:
    if epoch is None:
        return "—"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))
    except (OverflowError, OSError, ValueError):
        return "—"


def fmt_value(value: Value | None) -> str:
    if isinstance(value, bool):
        return "PASS" if value else "FAIL"
    if value is None:
        return "—"
    return fmt_number(value) if float(value).is_integer() else f"{value:.3g}"


def band(value: float, score_range: tuple[float, float] | None) -> str:
    """Colour of a score on its declared scale; neutral without one."""
    if score_range is None or score_range[1] <= score_range[0]:
        return "neutral"
    position = (value - score_range[0]) / (score_range[1] - score_range[0])
    return "good" if position >= 0.75 else "mid" if position >= 0.5 else "bad"


def badge(result: CaseResult | None, stats: JudgeStats | None, *, incomplete: bool = False) -> str:
    """A verdict as a coloured badge; `incomplete` marks one given on a case whose agent did not finish."""
    mark = ('<span class="badge inc" title="the case did not complete: judged on what it left">'
            "incomplete</span>") if incomplete else ""
    if result is None:
        return '<span class="badge skip">—</span>' + mark
    if result.status == "error":
        return '<span class="badge error">ERROR</span>' + mark
    if result.status == "not_run":  # the case never ran: never a pass, whatever it left
        return '<span class="badge error">NOT RUN</span>'
    if result.status == "skipped":
        return '<span class="badge skip">SKIP</span>' + mark
    value = result.value
    if isinstance(value, bool):
        css = "pass" if value else "fail"
    else:
        css = band(float(value), stats.score_range if stats else None) if value is not None else "neutral"
    return f'<span class="badge {css}">{esc(fmt_value(value))}</span>{mark}'


# How a case ended, as a label and a colour.
_END_LABELS = {
    "exited": "completed", "timed_out": "timed out", "oom_killed": "out of memory", "signaled": "killed by a signal",
    "budget_exhausted": "budget exhausted", "hook_failed": "hook failed", "error": "error",
    "infra_error": "infrastructure error", "interrupted": "interrupted", "replay_mismatch": "replay mismatch",
}


def end_label(outcome: CaseOutcome | None) -> str:
    if outcome is None:
        return "no record"
    if outcome.end_reason == "exited" and not outcome.ran:
        return "never ran"
    label = _END_LABELS.get(outcome.end_reason, outcome.end_reason)
    if outcome.completed and outcome.exit_code not in (0, None):
        return f"completed, exit {outcome.exit_code}"
    return label


def end_css(outcome: CaseOutcome | None) -> str:
    if outcome is None or not outcome.completed:
        if outcome is not None and outcome.end_reason == "infra_error":
            return "infra"
        if outcome is not None and outcome.end_reason == "interrupted":
            return "interrupted"
        return "fail"
    return "pass" if outcome.exit_code in (0, None) else "mid"


def end_badge(outcome: CaseOutcome | None) -> str:
    return f'<span class="badge {end_css(outcome)}">{esc(end_label(outcome))}</span>'
