"""junit.xml: one testcase per (case, judge); failures, errors and skips distinguished."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from agent_eval_sandbox.config.models import ThresholdConfig
from agent_eval_sandbox.judges.results import CaseResult, JudgeMeta
from agent_eval_sandbox.report.junit import render_junit
from agent_eval_sandbox.report.summary import Summary, count_cases, summarize
from agent_eval_sandbox.rundir.models import CaseOutcome
from tests.unit.report.summary_fixture import HOSTILE_CASE, make_summary


def _suites(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)
    return {suite.get("name", ""): suite for suite in root.iter("testsuite")}


def test_counts_and_outcomes() -> None:
    xml = render_junit(make_summary())
    root = ET.fromstring(xml)
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("8", "4", "1", "1")
    suites = _suites(xml)
    correct = {case.get("name"): case for case in suites["demo.correct"].iter("testcase")}
    assert set(correct) == {"case-1", HOSTILE_CASE, "case-3"}
    assert correct["case-1"].find("failure") is None
    assert correct[HOSTILE_CASE].find("failure") is not None
    assert correct["case-3"].find("skipped") is not None
    quality = {case.get("name"): case for case in suites["demo.quality"].iter("testcase")}
    assert quality[HOSTILE_CASE].find("error").get("message").startswith("returned 7")
    # min_mean 4.0 gates numeric scores per case: 5 passes, the reduced 2 (median_low of 4 and 2) fails.
    assert quality["case-1"].find("failure") is None
    assert "score 2 is below min_mean 4.0" in quality["case-3"].find("failure").get("message")
    thresholds = {case.get("name"): case for case in suites["demo.thresholds"].iter("testcase")}
    assert thresholds["correct.min_pass_rate"].find("failure").get("message") == "[correct] pass_rate: >= 0.9 -> 0.5"
    assert thresholds["quality.min_mean"].find("failure").get("message") == "[quality] mean: >= 4.0 -> 3.5"


def test_scores_without_a_min_mean_gate_never_fail() -> None:
    xml = render_junit(make_summary({"correct": ThresholdConfig(min_pass_rate=0.5)}))
    quality = {case.get("name"): case for case in _suites(xml)["demo.quality"].iter("testcase")}
    assert quality["case-3"].find("failure") is None and quality["case-3"].find("system-out") is not None


def test_control_characters_are_dropped_so_the_xml_parses() -> None:
    xml = render_junit(make_summary())
    assert "\x00" not in xml and "\x1b" not in xml
    ET.fromstring(xml)


# ---- cases that never ran, real times, judges without a threshold --------------------------------


def _with_cases(thresholds: dict[str, ThresholdConfig]) -> Summary:
    per_case = {
        "fast": {"gated": CaseResult.scored("check", True, "ok"), "free": CaseResult.scored("check", False, "meh")},
        "slow": {"gated": CaseResult.scored("check", False, "wrong"),
                 "free": CaseResult.errored("check", "nothing to judge: no tool calls")},
        "gone": {"gated": CaseResult.not_run("check", "infra_error", "not judged: the case did not run"),
                 "free": CaseResult.not_run("check", "infra_error", "not judged: the case did not run")},
    }
    outcomes = {
        "fast": CaseOutcome(case_id="fast", end_reason="exited", exit_code=0, duration_s=1.25, agent_duration_s=1.0),
        "slow": CaseOutcome(case_id="slow", end_reason="exited", exit_code=0, duration_s=42.5, agent_duration_s=40.0),
        "gone": CaseOutcome(case_id="gone", end_reason="infra_error", error="docker"),
    }
    return summarize(run_id="r", eval_name="demo", title="t", config_path=None, scored_at="now",
                     judges=[JudgeMeta("gated", "check"), JudgeMeta("free", "check")], per_case=per_case,
                     thresholds=thresholds, run_metrics=None, cases=count_cases(outcomes))


def _cases(xml: str, suite: str) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in _suites(xml)[suite].iter("testcase")}


def test_each_testcase_takes_its_cases_real_time() -> None:
    xml = render_junit(_with_cases({"gated": ThresholdConfig(min_pass_rate=0.5)}))
    gated = _cases(xml, "demo.gated")
    assert (gated["fast"].get("time"), gated["slow"].get("time"), gated["gone"].get("time")) == (
        "1.250", "42.500", "0.000")
    assert _suites(xml)["demo.gated"].get("time") == "43.750"


def test_a_judge_without_a_threshold_is_reported_but_fails_nothing_unless_asked() -> None:
    xml = render_junit(_with_cases({"gated": ThresholdConfig(min_pass_rate=0.5)}))
    free = _cases(xml, "demo.free")
    assert free["fast"].find("failure") is None and free["slow"].find("error") is None
    assert "verdict: failure (not gated" in free["fast"].find("system-out").text
    assert "nothing to judge" in free["slow"].find("system-out").text
    # the gated judge's false verdict is a failure; the threshold is a testcase of its own
    assert _cases(xml, "demo.gated")["slow"].find("failure") is not None
    assert _cases(xml, "demo.thresholds")["gated.min_pass_rate"].find("failure") is not None
    asked = _cases(render_junit(_with_cases({}), fail_on_judge=True), "demo.free")
    assert asked["fast"].find("failure") is not None and asked["slow"].find("error") is not None


def test_a_case_that_never_ran_is_an_error_on_every_judge_gated_or_not() -> None:
    xml = render_junit(_with_cases({}))
    for suite in ("demo.gated", "demo.free"):
        gone = _cases(xml, suite)["gone"]
        assert gone.find("error") is not None and "did not run" in gone.find("error").get("message")
    run = _cases(xml, "demo.run")["cases"]
    assert "infrastructure errors" in run.find("error").get("message")
    root = ET.fromstring(xml)
    assert int(root.get("errors")) == 3 and int(root.get("failures")) == 0  # nothing gated: only never-ran fails
