"""junit.xml for CI dashboards (pure): one testcase per (case, judge), one per threshold check, one for the run.

A testcase's time is its case's real `duration_s`. What fails the suite:

- a case that never ran: an `<error>` on every judge, gated or not — never a pass;
- a judge with a threshold (`thresholds.<judge>`): a false verdict or a score
  below its `min_mean` is a `<failure>`, a judge error an `<error>`;
- a judge without a threshold is reported (its verdict in `<system-out>`) but
  fails nothing, unless `fail_on_judge` (`--junit-fail-on-judge`) asks;
- each threshold check is a testcase of its own (`<eval>.thresholds`), and the
  run is one more (`<eval>.run`): an `<error>` for infrastructure errors, a
  `<failure>` when no planned case completed.

Skipped results are `<skipped>`. Characters XML 1.0 cannot carry are dropped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from agent_eval_sandbox.config.models import THRESHOLD_KEYS
from agent_eval_sandbox.judges.results import CaseResult
from agent_eval_sandbox.report.summary import CaseCounts, Summary

_XML_INVALID = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MESSAGE_CAP = 300
_COUNTED = {"failure": "failures", "error": "errors", "skipped": "skipped"}


def _x(text: object) -> str:
    return _XML_INVALID.sub("", "" if text is None else str(text))


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_CAP else line[:_MESSAGE_CAP] + "…"


def _verdict(result: CaseResult, min_mean: float | None) -> tuple[str | None, str]:
    """(None | 'failure' | 'error' | 'skipped', message) as if the judge were gated."""
    if result.status == "not_run":
        return "error", result.error or "not judged: the case did not run"
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


def _finish(suite: ET.Element, counts: Mapping[str, int], time_s: float = 0.0) -> None:
    for key in ("tests", "failures", "errors", "skipped"):
        suite.set(key, str(counts.get(key, 0)))
    suite.set("time", f"{time_s:.3f}")


def _case_time(cases: CaseCounts | None, case_id: str) -> float:
    ending = cases.endings.get(case_id) if cases is not None else None
    return (ending.duration_s or 0.0) if ending is not None else 0.0


def _judge_suite(root: ET.Element, summary: Summary, judge: str, fail_on_judge: bool) -> dict[str, int]:
    suite = _suite(root, f"{summary.eval}.{judge}")
    gates = summary.thresholds.config.get(judge)
    gated = gates is not None and any(getattr(gates, key) is not None for key in THRESHOLD_KEYS)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for case_id, results in summary.per_case.items():
        result = results.get(judge)
        if result is None:
            continue
        time_s = _case_time(summary.cases, case_id)
        total_time += time_s
        case = ET.SubElement(suite, "testcase", classname=_x(f"{summary.eval}.{judge}"), name=_x(case_id),
                             time=f"{time_s:.3f}")
        kind, message = _verdict(result, gates.min_mean if gates else None)
        if result.incomplete:
            message = f"(incomplete: {result.end_reason}) {message}".strip()
        reported_only = kind in ("failure", "error") and result.status != "not_run" and not (gated or fail_on_judge)
        counts["tests"] += 1
        if kind is not None and not reported_only:
            element = ET.SubElement(case, kind, message=_x(_short(message)))
            if kind != "skipped":
                element.text = _x(message)
            counts[_COUNTED[kind]] += 1
        out = []
        if reported_only:
            out.append(f"verdict: {kind} (not gated: the judge has no threshold; --junit-fail-on-judge fails it)")
            out.append(message)
        elif result.status == "scored":
            out.append(f"value: {result.value}" + (f" (incomplete: {result.end_reason})" if result.incomplete else ""))
            out.append(result.rationale)
        if out:
            ET.SubElement(case, "system-out").text = _x("\n".join(out))
    _finish(suite, counts, total_time)
    suite.set("judge_type", summary.judges[judge].judge_type)
    return counts


def _thresholds_suite(root: ET.Element, summary: Summary) -> dict[str, int]:
    suite = _suite(root, f"{summary.eval}.thresholds")
    counts = {"tests": 0, "failures": 0}
    for check in summary.thresholds.checks:
        case = ET.SubElement(suite, "testcase", classname=_x(f"{summary.eval}.thresholds"),
                             name=_x(f"{check.judge}.{check.key}"), time="0.000")
        counts["tests"] += 1
        if not check.passed:
            ET.SubElement(case, "failure", message=_x(check.line())).text = _x(check.line())
            counts["failures"] += 1
    _finish(suite, counts)
    return counts


def _run_suite(root: ET.Element, summary: Summary, cases: CaseCounts) -> dict[str, int]:
    suite = _suite(root, f"{summary.eval}.run")
    case = ET.SubElement(suite, "testcase", classname=_x(f"{summary.eval}.run"), name="cases", time="0.000")
    counts = {"tests": 1, "failures": 0, "errors": 0}
    text = (f"{cases.planned} planned, {cases.ran} ran, {cases.completed} completed"
            + (", interrupted" if cases.interrupted else ""))
    if cases.infra_errors:
        message = f"{cases.infra_errors} case(s) hit infrastructure errors (the tool's, not the skill's): {text}"
        ET.SubElement(case, "error", message=_x(message)).text = _x(message)
        counts["errors"] += 1
    elif cases.nothing_completed:
        message = f"no case completed: {text}"
        ET.SubElement(case, "failure", message=_x(message)).text = _x(message)
        counts["failures"] += 1
    ET.SubElement(case, "system-out").text = _x(text)
    _finish(suite, counts)
    return counts


def render_junit(summary: Summary, *, fail_on_judge: bool = False) -> str:
    root = ET.Element("testsuites", name=_x(summary.eval))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    parts = [_judge_suite(root, summary, judge, fail_on_judge) for judge in summary.judges]
    if summary.thresholds.checks:
        parts.append(_thresholds_suite(root, summary))
    if summary.cases is not None:
        parts.append(_run_suite(root, summary, summary.cases))
    for counts in parts:
        for key in totals:
            totals[key] += counts.get(key, 0)
    _finish(root, totals, sum(_case_time(summary.cases, c) for c in summary.per_case))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
