"""report.html (pure rendering): self-contained, escaped, failures first, every case readable, bounded."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from html.parser import HTMLParser
from typing import Any

from agent_eval_sandbox.report.html import MAX_ROWS, render_html
from agent_eval_sandbox.report.view import CaseView, FileView, RunView
from agent_eval_sandbox.rundir.models import CaseOutcome
from tests.unit.judges.rundir_fixture import assistant, result_event, tool, tool_result
from tests.unit.report.summary_fixture import HOSTILE_CASE, SCRIPT, make_summary

IMG = "<img src=x onerror=alert(1)>"
NON_UTF8 = "caf\udce9.txt"  # the bytes b"caf\xe9.txt" as Python carries a name that is not UTF-8
BIDI = "admin\u202egnp.exe"


def outcome(**fields: Any) -> CaseOutcome:
    data: dict[str, Any] = {"end_reason": "exited", "exit_code": 0, "agent_duration_s": 5.0, "duration_s": 6.0,
                            "cost_usd": 0.01, "num_turns": 2,
                            "integrity": {"checked": True, "dropped": 0, "unverified": 0, "findings": []}}
    data.update(fields)
    return CaseOutcome.model_validate(data)


OUTCOMES: dict[str, CaseOutcome | None] = {
    "case-1": outcome(case_id="case-1", result="All done."),
    HOSTILE_CASE: outcome(case_id=HOSTILE_CASE, end_reason="timed_out", exit_code=-1, error=f"killed {SCRIPT}"),
    "case-3": outcome(case_id="case-3", end_reason="error", exit_code=None, agent_duration_s=None,
                      error="model_script.yaml: step 2: unknown key 'toolz'"),
}

HOSTILE_EVENTS = [
    {"type": "system", "subtype": "init", "model": "m-1", "timestamp": None},
    assistant(f"I will {SCRIPT}", [tool("Bash", "t1", command=f"echo '{IMG}'")], thinking=f"hmm {SCRIPT}"),
    tool_result("t1", f"out {SCRIPT}", name="Bash"),
    assistant("", [tool(f"Evil{SCRIPT}", "t2", **{f"k{SCRIPT}": {"nested": SCRIPT}})]),
    {**tool_result("t2", "denied", is_error=True), "unverified": True},
    result_event(),
]


def case_view(case_id: str, **fields: Any) -> CaseView:
    return CaseView(case_id=case_id, location=f"cases/{case_id}", outcome=OUTCOMES.get(case_id), **fields)


VIEWS = {
    "case-1": case_view("case-1", prompt=FileView("cases/case-1/prompt.txt", 9, "/greet Ada"),
                        input=FileView("cases/case-1/input.yaml", 10, "name: Ada\n"),
                        events=[assistant("Hello there", [tool("Write", "w1", file_path="a.md", content="Hi")]),
                                tool_result("w1", "written", name="Write"), assistant("All done.")]),
    HOSTILE_CASE: case_view(
        HOSTILE_CASE, prompt=FileView("p", 1, f"do {SCRIPT}"), input=FileView("i", 1, f"name: '{SCRIPT}'"),
        events=HOSTILE_EVENTS,
        files=(FileView(f"cases/{HOSTILE_CASE}/out/{NON_UTF8}", 5, f"text {IMG}"),
               FileView(f"cases/{HOSTILE_CASE}/out/{BIDI}", 5, "x\x1b[31mred\x00"),
               FileView(f"cases/{HOSTILE_CASE}/out/pic.png", 2048, None)),
        diff=FileView(f"cases/{HOSTILE_CASE}/workspace.diff", 40, f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+{SCRIPT}\n")),
    "case-3": case_view("case-3", events_note="no events.json: the agent's conversation was not recorded"),
}

RUN = RunView(eval="demo", run_id="r-1", root="/runs/demo/r-1", model="claude-sonnet-4-6", offline=True,
              claude_version="2.1.332", image="agent-eval-sandbox:2.1.332-abc", mode="case",
              settings={"timeout_s": 120, "parallelism": 2, "max_budget_usd": 0.5}, started_at=1_735_732_800.0,
              wall_clock_s=73.25, token_usage={"input_tokens": 12345, "output_tokens": 678}, cost_usd=0.1234,
              has_result=True, planned=3, finished=3)


def page(run: RunView = RUN, outcomes: Mapping[str, CaseOutcome | None] = OUTCOMES,
         views: Mapping[str, CaseView] = VIEWS, **kwargs: Any) -> str:
    return render_html(make_summary(), run, outcomes, lambda case_id: views.get(case_id, CaseView(case_id, "x")),
                       **kwargs)


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.text: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "action", "srcset", "data")]
        self.ids += [v or "" for k, v in attrs if k == "id"]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(markup: str) -> _Dom:
    dom = _Dom()
    dom.feed(markup)
    return dom


def text_of(markup: str) -> str:
    return "".join(parse(markup).text)


def test_one_file_with_no_script_no_external_resource_and_no_link_that_can_die() -> None:
    markup = page()
    dom = parse(markup)
    assert not {"script", "link", "img", "iframe", "object", "embed", "form", "base"} & set(dom.tags)
    assert dom.urls and all(url.startswith("#") for url in dom.urls), [u for u in dom.urls if not u.startswith("#")]
    for url in dom.urls:  # every in-page link lands on something
        assert url[1:] in dom.ids, url
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', markup)
    assert csp and "default-src 'none'" in csp.group(1) and "script-src" not in csp.group(1)
    assert "onerror=" not in markup.replace("onerror=alert", "")  # only ever as escaped text


def test_hostile_text_is_shown_as_text_everywhere_and_never_markup() -> None:
    markup = page()
    assert SCRIPT not in markup and IMG not in markup
    text = text_of(markup)
    for shown in (f"I will {SCRIPT}", f"echo '{IMG}'", f"out {SCRIPT}", f"Evil{SCRIPT}", f"k{SCRIPT}",
                  f"do {SCRIPT}", f"text {IMG}", f"+{SCRIPT}", f"killed {SCRIPT}", HOSTILE_CASE):
        assert shown in text, shown
    assert "caf\\xe9.txt" in text  # a name that is not UTF-8 shows its bytes
    assert "admin\\u202egnp.exe" in text and "\u202e" not in markup  # no bidi spoofing
    assert "x\\x1b[31mred\\x00" in text and "\x00" not in markup
    markup.encode("utf-8")  # no lone surrogate left to break the file


def test_the_header_says_what_ran_with_what() -> None:
    text = text_of(page())
    for fact in ("claude-sonnet-4-6", "scripted", "2.1.332", "agent-eval-sandbox:2.1.332-abc", "73.2 s",
                 "12,345 in · 678 out", "$0.1234 scripted", "3 planned · 2 ran · 1 completed", "2025-01-01 12:00:00 UTC",
                 "timeout 120 s", "parallelism 2", "/runs/demo/r-1", "run r-1", "Demo <Report>"):
        assert fact in text, fact
    live = text_of(page(run=RunView(eval="demo", run_id="r-1", root="/r", offline=False, cost_usd=1.5,
                                    has_result=True)))
    assert "live" in live and "$1.5000" in live and "scripted" not in live


def test_an_interrupted_run_has_a_banner_with_planned_and_finished() -> None:
    run = RunView(eval="demo", run_id="r-1", root="/r", has_result=True, interrupted=True, planned=10, finished=3)
    text = text_of(page(run=run))
    assert "Interrupted" in text and "3 of 10 planned cases finished; 7 did not finish" in text
    assert "10 planned" in text
    assert "Interrupted" not in text_of(page())
    unfinished = text_of(page(run=RunView(eval="demo", run_id="r-1", root="/r", has_result=False)))
    assert "Unfinished run: it has no run_result.json" in unfinished


def test_infrastructure_errors_and_a_run_where_nothing_completed_have_banners() -> None:
    outcomes = {cid: outcome(case_id=cid, end_reason="infra_error", agent_duration_s=None, exit_code=None,
                             error="gateway not ready") for cid in ("case-1", HOSTILE_CASE, "case-3")}
    views = {cid: replace(view, outcome=outcomes[cid]) for cid, view in VIEWS.items()}
    text = text_of(page(outcomes=outcomes, views=views))
    assert "Infrastructure errors: 3 cases failed because the tool's own plumbing failed" in text
    assert "No case completed: of 3 planned, 0 started" in text
    assert "infrastructure error" in text and "The tool's own plumbing failed (not the skill's doing)" in text
    assert "Infrastructure errors" not in text_of(page())


def _section(markup: str, section: str) -> str:
    start = markup.index(f'<section id="{section}">')
    return markup[start:markup.index("</section>", start)]


def test_failures_come_first_with_verdicts_unfinished_cases_and_regressions() -> None:
    markup = page()
    order = [markup.index(f'<section id="{s}">') for s in ("failures", "thresholds", "judges", "cases", "details")]
    assert order == sorted(order)
    failures = text_of(_section(markup, "failures"))
    assert "Threshold regressions · 2" in failures and "min_pass_rate" in failures
    assert "Cases that did not complete · 2" in failures
    assert failures.index(HOSTILE_CASE) < failures.index("case-3")
    assert "timed_out" in failures and "unknown key 'toolz'" in failures and f"killed {SCRIPT}" in failures
    # The false verdict, the errored judge, and a score below its judge's min_mean gate (2 < 4).
    assert "Failing verdicts · 3" in failures
    assert f"bad {SCRIPT}" in failures and "outside its declared score_range" in failures
    assert "below min_mean 4" in failures
    assert "case-1" not in failures  # it passed everything (its score 5 is above the gate)


def test_nothing_failed_says_so() -> None:
    summary = make_summary(thresholds={})
    summary.per_case = {"case-1": summary.per_case["case-1"]}
    markup = render_html(summary, RUN, {"case-1": OUTCOMES["case-1"]}, lambda c: VIEWS[c])
    assert "Nothing failed: every case completed and every verdict passed." in text_of(_section(markup, "failures"))


def test_verdicts_on_a_case_that_did_not_complete_are_marked() -> None:
    details = _section(page(), "details")
    hostile = details[details.index('id="case-2"'):]
    assert 'class="badge inc"' in hostile.split("</article>")[0]
    case_1 = details[details.index('id="case-1"'):].split("</article>")[0]
    assert 'class="badge inc"' not in case_1


def test_a_case_shows_prompt_input_conversation_outputs_diff_and_judges() -> None:
    details = _section(page(), "details")
    case_1 = text_of(details[details.index('id="case-1"'):].split("</article>")[0])
    for part in ("/greet Ada", "name: Ada", "Hello there", "Write", "a.md", "written", "All done.", "final result",
                 "correct", "all good", "excellent", "exit code 0"):
        assert part in case_1, part
    hostile = details[details.index('id="case-2"'):].split("</article>")[0]
    hostile_text = text_of(hostile)
    assert "session started · model m-1" in hostile_text and "thinking" in hostile_text
    assert '<span class="badge warn"' in hostile  # the unverified result is marked
    assert "binary, not shown" in hostile_text and "pic.png" in hostile_text and "2.0 KiB" in hostile_text
    assert "Workspace diff" in hostile_text and '<span class="add">+&lt;script&gt;' in hostile
    assert "end reason timed_out" in hostile_text and "exit code -1" in hostile_text
    case_3 = text_of(details[details.index('id="case-3"'):].split("</article>")[0])
    assert "the agent never started" in case_3 and "no events.json" in case_3 and "unknown key 'toolz'" in case_3


def test_tool_results_sit_under_their_call_and_subagents_inside_theirs() -> None:
    events = [
        assistant("delegating", [tool("Task", "t1", prompt="go"), tool("Bash", "t2", command="ls")]),
        {**assistant("sub says hi", [tool("Read", "s1", file_path="/x")]), "parent_tool_use_id": "t1"},
        {**tool_result("s1", "sub read result"), "parent_tool_use_id": "t1"},
        tool_result("t1", "task finished"),
        tool_result("zz", "a result for no call"),
        assistant("done"),
    ]
    view = CaseView("case-1", "cases/case-1", outcome=OUTCOMES["case-1"], events=events)
    markup = page(views={"case-1": view})
    article = markup[markup.index('id="case-1"'):].split("</article>")[0]
    task = article[article.index('<span class="tname">Task</span>'):]
    task = task[:task.index('<span class="tname">Bash</span>')]
    for inside in ("sub says hi", "sub read result", "task finished", "subagent"):
        assert inside in task, inside
    bash = article[article.index('<span class="tname">Bash</span>'):]
    assert "no result" in bash[:bash.index("</summary>")]
    assert "tool result for an unknown call" in article and "a result for no call" in article
    assert text_of(article).index("delegating") < text_of(article).index("done")


def test_long_text_folds_and_huge_text_is_cut_with_a_marker() -> None:
    long_text = "\n".join(f"line {i}" for i in range(100))
    huge = "A" * 50_000 + "END-OF-HUGE"
    events = [assistant(long_text, [tool("Bash", "t1", command="cat big")]), tool_result("t1", huge)]
    view = CaseView("case-1", "cases/case-1", outcome=OUTCOMES["case-1"], events=events,
                    files=(FileView("cases/case-1/out/big.txt", 90_000, "B" * 60_000 + "FILE-END", truncated=True),),
                    diff=FileView("cases/case-1/workspace.diff", 900_000, "+x\n" * 60_000, truncated=True))
    markup = page(views={"case-1": view})
    article = markup[markup.index('id="case-1"'):].split("</article>")[0]
    assert '<details class="say-long">' in article and "100 lines" in text_of(article)
    assert "END-OF-HUGE" not in article and "FILE-END" not in article
    assert "more characters not shown here; the whole text is in cases/case-1/events.json" in text_of(article)
    assert "only the start is shown" in text_of(article) and "cases/case-1/out/big.txt" in text_of(article)
    assert "cases/case-1/workspace.diff" in text_of(article)


def test_a_case_is_held_to_its_budget() -> None:
    events = []
    for i in range(2000):
        events += [assistant(f"step {i}", [tool("Bash", f"t{i}", command="x" * 3000)]), tool_result(f"t{i}", "y" * 5000)]
    view = CaseView("case-1", "cases/case-1", outcome=OUTCOMES["case-1"], events=events)
    markup = page(views={"case-1": view}, case_budget=200_000)
    article = markup[markup.index('id="case-1"'):].split("</article>")[0]
    assert len(article) < 200_000 + 20_000
    assert "more events not shown" in text_of(article) and "step 0" in article and "step 1999" not in article


def test_the_page_is_bounded_however_big_the_run_and_problem_cases_get_room_first() -> None:
    big_events = [assistant("x" * 15_000), assistant("y" * 15_000)] * 20
    n = 60
    summary = make_summary(thresholds={})
    results = summary.per_case["case-1"]
    failing = summary.per_case[HOSTILE_CASE]
    summary.per_case = {f"c{i:03}": (failing if i == n - 1 else results) for i in range(n)}
    outcomes = {cid: OUTCOMES["case-1"] for cid in summary.per_case}
    views = {cid: CaseView(cid, f"cases/{cid}", outcome=OUTCOMES["case-1"], events=big_events) for cid in outcomes}
    markup = render_html(summary, RUN, outcomes, lambda c: views[c], page_budget=1_000_000, case_budget=200_000)
    assert len(markup) < 1_000_000 + 200_000 + 200_000  # details + one overrun + tables and stubs
    stubs = markup.count("The report has no room left for this case")
    assert 0 < stubs < n
    last = markup[markup.index(f'id="case-{n}"'):].split("</article>")[0]
    assert "The report has no room left" not in last  # the failing case was given room first
    assert "bad " in text_of(last)


def test_beyond_max_rows_cases_are_counted_not_listed() -> None:
    summary = make_summary(thresholds={})
    results = summary.per_case["case-1"]
    summary.per_case = {f"c{i:05}": results for i in range(MAX_ROWS + 5)}
    outcomes = {cid: OUTCOMES["case-1"] for cid in summary.per_case}
    markup = render_html(summary, RUN, outcomes, lambda c: CaseView(c, f"cases/{c}", outcome=OUTCOMES["case-1"]))
    assert "… 5 more cases not listed here" in text_of(markup)
    assert f"c{MAX_ROWS + 4:05}" not in markup


def test_badges_band_scores_on_the_declared_scale() -> None:
    markup = page()
    assert '<span class="badge good">5</span>' in markup
    assert '<span class="badge bad">2</span>' in markup  # median_low of 4 and 2
    assert '<span class="badge error">ERROR</span>' in markup and '<span class="badge skip">SKIP</span>' in markup
    assert '<span class="badge pass">PASS</span>' in markup and '<span class="badge fail">FAIL</span>' in markup


def test_without_thresholds_or_judges_the_page_says_so() -> None:
    assert "No thresholds configured" in text_of(render_html(make_summary(thresholds={}), RUN, OUTCOMES,
                                                             lambda c: VIEWS[c]))
    empty = make_summary(thresholds={})
    empty.judges = {}
    empty.per_case = {}
    text = text_of(render_html(empty, RUN, OUTCOMES, lambda c: VIEWS[c]))
    assert "No judges ran: nothing was checked." in text
    assert "case-3" in text  # a case the run knows of is listed even though nothing judged it


def test_batch_mode_shows_the_one_conversation_once() -> None:
    batch = CaseView("batch invocation", ".", outcome=OUTCOMES["case-1"], events=[assistant("BATCH-TURN handles all")])
    views = {cid: replace(view, events=None, events_note="batch mode: shown once, above") for cid, view in VIEWS.items()}
    markup = page(run=replace(RUN, batch=batch, mode="batch"), views=views)
    details = text_of(_section(markup, "details"))
    assert details.count("BATCH-TURN handles all") == 1 and "The batch invocation" in details
    assert details.count("batch mode: shown once, above") == 3
