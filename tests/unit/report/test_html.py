"""report.html: self-contained, escaped, every case shown."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from agent_eval_sandbox.report.facts import CaseFacts, Link
from agent_eval_sandbox.report.html import render_html
from tests.unit.report.summary_fixture import HOSTILE_CASE, SCRIPT, make_summary

FACTS = {
    "case-1": CaseFacts(end_reason="exited", exit_code=0, duration_s=12.34, cost_usd=0.0123, num_turns=3,
                        links=(Link("transcript", "cases/case-1/transcript.jsonl"), Link("stdout", "cases/case-1/stdout.log"))),
    HOSTILE_CASE: CaseFacts(end_reason="timed_out", exit_code=-1, links=(Link("gateway log", "cases/case-%22x%22/gateway.jsonl"),)),
}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.hrefs += [v or "" for k, v in attrs if k in ("href", "src")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    return collector


def test_no_script_and_no_external_asset() -> None:
    page = render_html(make_summary(), FACTS)
    parsed = _parse(page)
    assert "script" not in parsed.tags
    assert "link" not in parsed.tags and "img" not in parsed.tags
    assert all(not re.match(r"^[a-z]+:", href) for href in parsed.hrefs)  # relative or #anchor only
    assert "default-src 'none'" in page


def test_untrusted_text_is_escaped_and_shown() -> None:
    page = render_html(make_summary(), FACTS)
    assert SCRIPT not in page
    assert "&lt;script&gt;document.body.setAttribute(&#x27;data-pwned&#x27;,&#x27;1&#x27;)&lt;/script&gt;" in page
    text = "".join(_parse(page).text)
    assert SCRIPT in text  # the reader sees it as text
    assert HOSTILE_CASE in text
    assert 'case-&quot;2&quot;&lt;b&gt;' in page


def test_every_case_judge_and_fact_is_on_the_page() -> None:
    page = render_html(make_summary(), FACTS)
    text = "".join(_parse(page).text)
    for case_id in ("case-1", HOSTILE_CASE, "case-3"):
        assert text.count(case_id) >= 2  # in the table and in the details
    for expected in ("exited", "timed_out", "unknown", "12.3 s", "$0.0123", "REGRESSION", "excellent",
                     "returned 7, outside its declared score_range [1, 5]", "Skipped: condition 'x' is false",
                     "unstable over 3 samples", "pass rate 50.0%", "mean 3.5 on [1, 5]", "Demo <Report>"):
        assert expected in text, expected
    hrefs = _parse(page).hrefs
    assert "cases/case-1/transcript.jsonl" in hrefs and "cases/case-%22x%22/gateway.jsonl" in hrefs
    assert "#case-2" in hrefs


def test_badges_band_scores_on_the_declared_scale() -> None:
    page = render_html(make_summary(), {})
    assert '<span class="badge good">5</span>' in page
    assert '<span class="badge bad">2</span>' in page  # median_low of 4 and 2
    assert '<span class="badge error">ERROR</span>' in page and '<span class="badge skip">SKIP</span>' in page
    assert '<span class="badge pass">PASS</span>' in page and '<span class="badge fail">FAIL</span>' in page


def test_banner_without_thresholds() -> None:
    assert "No thresholds configured" in render_html(make_summary(thresholds={}), {})
