"""junit.xml: one testcase per (case, judge); failures, errors and skips distinguished."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from agent_eval_sandbox.config.models import ThresholdConfig
from agent_eval_sandbox.report.junit import render_junit
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
