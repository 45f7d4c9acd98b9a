"""junit.xml for CI (pure): one testcase per (case, judge), plus one per threshold check.

A judge that errored is an `<error>`, a failed verdict a `<failure>`, a
skipped judge `<skipped>`. Boolean verdicts fail when false; numeric scores
have no per-case verdict, so a score fails only below its judge's `min_mean`
gate (when there is one). Characters XML 1.0 cannot carry are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from agent_eval_sandbox.judges.results import CaseResult
from agent_eval_sandbox.report.summary import Summary

_XML_INVALID = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MESSAGE_CAP = 300


def _x(text: object) -> str:
    return _XML_INVALID.sub("", "" if text is None else str(text))


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_CAP else line[:_MESSAGE_CAP] + "…"


def _outcome(result: CaseResult, min_mean: float | None) -> tuple[str | None, str]:
    """(None | 'failure' | 'error' | 'skipped', message)."""
    if result.status == "error":
        return "error", result.error or "the judge errored"
    if result.status == "skipped":
        return "skipped", result.rationale or "skipped"
    value = result.value
    if isinstance(value, bool):
        return (None, "") if value else ("failure", result.rationale or "verdict: fail")
    if min_mean is not None and value is not None and value < min_mean:
        return "failure", f"score {value} is below min_mean {min_mean}: {result.rationale}"
    return None, ""


def _suite(parent: ET.Element, name: str) -> ET.Element:
    return ET.SubElement(parent, "testsuite", name=_x(name))


def _finish(suite: ET.Element, counts: Mapping[str, int]) -> None:
    for key in ("tests", "failures", "errors", "skipped"):
        suite.set(key, str(counts.get(key, 0)))


def render_junit(summary: Summary) -> str:
    root = ET.Element("testsuites", name=_x(summary.eval))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for judge, stats in summary.judges.items():
        suite = _suite(root, f"{summary.eval}.{judge}")
        gates = summary.thresholds.config.get(judge)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for case_id, results in summary.per_case.items():
            result = results.get(judge)
            if result is None:
                continue
            case = ET.SubElement(suite, "testcase", classname=_x(f"{summary.eval}.{judge}"), name=_x(case_id), time="0")
            kind, message = _outcome(result, gates.min_mean if gates else None)
            counts["tests"] += 1
            if kind is not None:
                element = ET.SubElement(case, kind, message=_x(_short(message)))
                if kind != "skipped":
                    element.text = _x(message)
                counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]] += 1
            if result.status == "scored":
                ET.SubElement(case, "system-out").text = _x(f"value: {result.value}\n{result.rationale}")
        _finish(suite, counts)
        suite.set("judge_type", stats.judge_type)
        for key in totals:
            totals[key] += counts[key]
    if summary.thresholds.checks:
        suite = _suite(root, f"{summary.eval}.thresholds")
        counts = {"tests": 0, "failures": 0}
        for check in summary.thresholds.checks:
            case = ET.SubElement(suite, "testcase", classname=_x(f"{summary.eval}.thresholds"),
                                 name=_x(f"{check.judge}.{check.key}"), time="0")
            counts["tests"] += 1
            if not check.passed:
                ET.SubElement(case, "failure", message=_x(check.line())).text = _x(check.line())
                counts["failures"] += 1
        _finish(suite, counts)
        totals["tests"] += counts["tests"]
        totals["failures"] += counts["failures"]
    _finish(root, totals)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
