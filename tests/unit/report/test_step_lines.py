"""The steps of a pipeline's case in the terminal and in report.html (pure)."""

from __future__ import annotations

from agent_eval_sandbox.report.html_case import render_case
from agent_eval_sandbox.report.summary import count_cases, step_line
from agent_eval_sandbox.report.view import CaseView
from agent_eval_sandbox.rundir.models import CaseOutcome, StepOutcome

STEPS = [
    StepOutcome(step_id="create", end_reason="exited", exit_code=0, agent_duration_s=1.0, duration_s=2.0),
    StepOutcome(step_id="refine", end_reason="exited", exit_code=1, agent_duration_s=1.0, duration_s=3.25,
                on_failure="continue"),
    StepOutcome(step_id="review", end_reason="error", skipped="the case's deadline passed"),
]
OUTCOME = CaseOutcome(case_id="c1", end_reason="timed_out", exit_code=None, agent_duration_s=2.0, steps=STEPS)


def test_a_line_per_step_with_its_ending_or_why_it_never_ran():
    assert [step_line(s) for s in STEPS] == [
        "create: exited (exit 0) after 2.0s",
        "refine: exited (exit 1) after 3.2s, on_failure: continue",
        "review: not run (the case's deadline passed)",
    ]
    assert step_line(STEPS[2], named=False) == "not run (the case's deadline passed)"


def test_the_summary_keeps_the_step_lines_only_for_a_pipelines_cases():
    counts = count_cases({"c1": OUTCOME, "plain": CaseOutcome(case_id="plain", end_reason="exited", exit_code=0,
                                                             agent_duration_s=1.0)})
    data = counts.to_data()
    assert data["endings"]["c1"]["steps"][2] == "review: not run (the case's deadline passed)"
    assert "steps" not in data["endings"]["plain"]


def test_report_html_shows_the_conversation_step_by_step():
    events = [{"type": "assistant", "text": "drafting CREATE-TEXT", "tools": [], "step": "create"},
              {"type": "assistant", "text": "refining REFINE-TEXT", "tools": [], "step": "refine"}]
    html = render_case(CaseView("c1", "cases/c1", outcome=OUTCOME, events=events), {}, {}, "c1")
    create, refine, review = (html.index(f"Step <code>{s}</code>") for s in ("create", "refine", "review"))
    assert create < html.index("CREATE-TEXT") < refine < html.index("REFINE-TEXT") < review
    assert "not run (the case&#x27;s deadline passed)" in html or "not run (the case's deadline passed)" in html
