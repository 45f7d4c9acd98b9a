"""The pieces of report.html: escaping what a reader could not see, cutting to size."""

from __future__ import annotations

import html

from agent_eval_sandbox.report.html_parts import Budget, cut_escaped, end_label, esc, one_line, pre
from agent_eval_sandbox.rundir.models import CaseOutcome


def test_esc_escapes_markup_and_makes_the_invisible_visible() -> None:
    assert esc('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert esc("caf\udce9") == "caf\\xe9"  # a byte of a name that is not UTF-8
    assert esc("\ud800") == "\\ud800"  # any other lone surrogate
    assert esc("a\x00b\x1bc\x7f\x85") == "a\\x00b\\x1bc\\x7f\\x85"
    assert esc("evil\u202etxt.exe\u2066") == "evil\\u202etxt.exe\\u2066"
    assert esc("tab\tand\nnewline\r\n") == "tab\tand\nnewline\n"
    assert esc(None) == "" and esc(3) == "3"


def test_cut_escaped_never_splits_an_entity() -> None:
    markup = esc("ab<cd")  # ab&lt;cd
    for limit in range(len(markup) + 1):
        cut = cut_escaped(markup, limit)
        assert len(cut) <= limit and markup.startswith(cut)
        assert html.unescape(cut) in "ab<cd" and not cut.endswith(("&", "&l", "&lt"))


def test_a_budget_cuts_pieces_to_their_cap_and_to_what_is_left() -> None:
    budget = Budget(100)
    markup, omitted = budget.text("x" * 30, cap=10)
    assert (markup, omitted) == ("x" * 10, 20) and budget.left == 90
    markup, omitted = budget.text("<" * 200, cap=1000)  # each < becomes &lt;
    assert markup == "&lt;" * 22 and omitted == 178 and budget.left == 2  # never half an entity
    assert budget.text("more", 10) == ("mo", 2)
    assert budget.spent and budget.text("again", 10) == ("", 5)


def test_pre_marks_a_cut_and_names_the_file_with_the_rest() -> None:
    block = pre(Budget(1000), "y" * 50, 20, "cases/c/events.json")
    assert block.startswith("<pre>" + "y" * 20 + "</pre>")
    assert "30 more characters not shown here" in block and "cases/c/events.json" in block
    assert "not shown" not in pre(Budget(1000), "short", 20, "f")


def test_one_line_squeezes_and_shortens() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    assert one_line("x" * 10, 5) == "xxxx…"
    assert one_line(None) == ""


def test_end_labels_tell_a_case_that_never_ran_from_one_that_stopped() -> None:
    assert end_label(None) == "no record"
    assert end_label(CaseOutcome(end_reason="exited", exit_code=0, agent_duration_s=1.0)) == "completed"
    assert end_label(CaseOutcome(end_reason="exited", exit_code=2, agent_duration_s=1.0)) == "completed, exit 2"
    assert end_label(CaseOutcome(end_reason="exited", exit_code=0)) == "never ran"
    assert end_label(CaseOutcome(end_reason="infra_error")) == "infrastructure error"
    assert end_label(CaseOutcome(end_reason="interrupted")) == "interrupted"
