"""report.html opened in headless Chromium (Debian's): what a reader sees, and hostile text never runs.

Each run is judged for real (`score_run`: judge worker processes), the page is
loaded from a copy of report.html alone in an empty directory — as a CI
artifact is — and Chromium both dumps the DOM after load and takes a
screenshot. The screenshots are saved under the test's tmp dir and their paths
printed (and recorded as junit properties) for a person to look at; with
$AGENT_EVAL_SCREENSHOT_DIR set they are copied there too (pytest keeps only its
last few tmp dirs), e.g. for CI to upload.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent_eval_sandbox.app.score import score_run
from tests.unit.judges.rundir_fixture import case_result, make_project, make_run
from tests.unit.report.run_fixture import (
    HOSTILE_CASE,
    IMG,
    SCRIPT,
    SECRET_LATE,
    make_failing_run,
    make_interrupted_run,
)

WINDOW = (1280, 2400)
_VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


class _Dom(HTMLParser):
    """The page's text, split into what shows without a click and what sits in a closed <details>."""

    def __init__(self) -> None:
        super().__init__()
        self.visible: list[str] = []
        self.folded: list[str] = []
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.body_attrs: dict[str, str | None] = {}
        self.ids: list[str] = []
        self.headings: list[str] = []  # <h2> texts, in order
        # (tag, hides its children, hidden itself)
        self._stack: list[tuple[str, bool, bool]] = []

    def _hidden(self) -> bool:
        return bool(self._stack) and self._stack[-1][1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        named = dict(attrs)
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "action", "data")]
        self.ids += [named["id"] or ""] if "id" in named else []
        if tag == "body":
            self.body_attrs = named
        if tag in _VOID:
            return
        hidden = self._hidden()
        if tag == "summary" and self._stack and self._stack[-1][0] == "details":
            hidden = self._stack[-1][2]  # a summary shows whenever its details does
        hides = hidden or (tag == "details" and "open" not in named)
        self._stack.append((tag, hides, hidden))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == tag:
                del self._stack[index:]
                return

    def handle_data(self, data: str) -> None:
        inside = [tag for tag, _, _ in self._stack]
        if "style" in inside or "title" in inside:
            return
        if inside and inside[-1] == "h2":
            self.headings.append(data)
        (self.folded if self._hidden() else self.visible).append(data)

    @property
    def text(self) -> str:
        return "".join(self.visible)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
         *args],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed


def _open_alone(report: Path, tmp_path: Path, name: str, chromium: str,
                record_property: Callable[[str, object], None]) -> _Dom:
    """report.html copied alone into an empty directory (as a CI artifact), dumped and photographed."""
    alone = tmp_path / f"{name}-artifact" / "report.html"
    alone.parent.mkdir()
    shutil.copyfile(report, alone)
    profile = tmp_path / f"{name}-profile"
    dom = _Dom()
    dom.feed(_chromium(chromium, profile, "--dump-dom", alone.as_uri()).stdout)
    shot = tmp_path / f"{name}.png"
    _chromium(chromium, profile, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}", alone.as_uri())
    assert _png_size(shot) == WINDOW and shot.stat().st_size > 50_000  # a rendered page, not a blank one
    keep = os.environ.get("AGENT_EVAL_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shot = Path(shutil.copy2(shot, Path(keep) / shot.name))
    print(f"report.html screenshot ({name}): {shot}")
    record_property(f"screenshot_{name}", str(shot))
    return dom


def _section_text(dom: _Dom, start: str, end: str) -> str:
    text = dom.text
    return text[text.index(start):text.index(end, text.index(start))]


@pytest.mark.chromium
def test_a_failing_run_reads_failures_first_with_each_conversation_inline(
        tmp_path: Path, chromium: str, record_property: Callable[[str, object], None]) -> None:
    result = score_run(make_failing_run(tmp_path))
    assert result.exit_code == 4  # a case hit an infrastructure error: that wins over the regression
    dom = _open_alone(result.reports.html, tmp_path, "failing", chromium, record_property)
    text = dom.text

    # The header: what ran, with what, and the banners.
    for fact in ("Browser check", "run 20250101-120000-abc123", "claude-sonnet-4-6", "scripted", "2.1.332",
                 "agent-eval-sandbox:2.1.332-test", "73.2 s", "12,345 in · 678 out", "$0.1234 scripted",
                 "5 planned · 3 ran · 2 completed"):
        assert fact in text, fact
    assert "Infrastructure errors: 1 case failed" in text and "REGRESSION: 1 of 2 threshold checks failed" in text

    # Failures first: before any case's detail, every failure with its reason.
    assert dom.headings == ["Failures first", "Thresholds", "Judges", "Cases · 5", "Case details"]
    failures = _section_text(dom, "Failures first", "Thresholds")
    for expected in ("Threshold regressions", "greeted", "min_pass_rate",
                     "Cases that did not complete · 3", "003-slow", "timed_out",
                     "004-broken-script", "unknown key 'toolz'", "005-gateway-reset", "ECONNRESET",
                     "Failing verdicts", HOSTILE_CASE, "artifact says:"):
        assert expected in failures, expected
    assert "001-ada" not in failures

    # Each case's conversation is on the page, readable without a click; tool inputs and results fold.
    details = text[text.rindex("Case details"):]
    for seen in ("/greeter Ada", "I'll write the greeting.", "printf 'Hello, Ada!'", "I wrote artifacts/greeting.md",
                 "Hello, Ada!", f"Let me look {SCRIPT}", "final result", "model_script.yaml: step 2"):
        assert seen in details, seen
    folded = "".join(dom.folded)
    assert "from-the-subagent" in folded and "permission denied: /workspace/artifacts" in text  # an error opens
    assert "unverified" in text and "Integrity check" in text
    assert "binary, not shown" in text and "caf\\xe9-\\xff.txt" in text
    assert SECRET_LATE in folded  # the long answer folds, whole (it is under the cap)

    # Nothing hostile ran, nothing points outside the file.
    assert "data-pwned" not in dom.body_attrs
    assert "script" not in dom.tags and "img" not in dom.tags
    assert SCRIPT in text and IMG in text
    assert all(url.startswith("#") and url[1:] in dom.ids for url in dom.urls)


@pytest.mark.chromium
def test_an_interrupted_run_has_its_banner_and_its_unfinished_cases_first(
        tmp_path: Path, chromium: str, record_property: Callable[[str, object], None]) -> None:
    result = score_run(make_interrupted_run(tmp_path))
    dom = _open_alone(result.reports.html, tmp_path, "interrupted", chromium, record_property)
    text = dom.text
    assert "Interrupted: the run was stopped (Ctrl-C or SIGTERM) with 2 of 4 planned cases finished" in text
    assert text.index("Interrupted:") < text.index("Failures first") and dom.headings[0] == "Failures first"
    assert "live — the model API" in text and "4 planned · 3 ran · 2 completed" in text
    failures = _section_text(dom, "Failures first", "Thresholds")
    assert "Cases that did not complete · 2" in failures
    assert "003-killed" in failures and "004-queued" in failures and "interrupted" in failures
    assert "001-ada" not in failures and "002-grace" not in failures
    assert "incomplete" in failures  # a verdict on a killed case is marked, never a plain pass
    assert "Starting…" in text[text.rindex("Case details"):]  # what the killed case did before it stopped


CASES = ["alpha", 'beta-<b>"2"', "gamma &amp; delta", "timeout-case"]

EVAL = f"""
name: browser
title: Browser check
dataset: {{path: dataset}}
outputs: [{{path: artifacts}}]
judges:
  - name: echo
    check: |
      text = outputs.get("artifacts_content", "")
      return len(text) > 0, "artifact says: " + text
  - name: score
    check: |
      return 3, "fine {SCRIPT}"
    score_range: [1, 5]
thresholds:
  echo: {{min_pass_rate: 0.5}}
"""


@pytest.mark.chromium
def test_the_report_shows_every_case_and_runs_no_untrusted_script(tmp_path: Path, chromium: str) -> None:
    config = make_project(tmp_path, EVAL, {case: {} for case in CASES})
    cases = {
        case: {"run_result.json": case_result(agent_duration_s=1.0), "artifacts/out.md": f"{SCRIPT}{IMG} from {case}",
               "stdout.log": "{}"}
        for case in CASES[:-1]
    }
    cases["timeout-case"] = {"run_result.json": case_result(end_reason="timed_out", exit_code=-1)}
    result = score_run(make_run(tmp_path, config, cases))
    dom = _Dom()
    dom.feed(_chromium(chromium, tmp_path / "profile", "--dump-dom", result.reports.html.as_uri()).stdout)
    text = dom.text
    for case in CASES:
        assert case in text, f"case {case!r} missing from the rendered report"
    assert "Browser check" in text and "timed_out" in text and "REGRESSION" not in text
    assert SCRIPT in text and "artifact says:" in text  # shown as text
    assert "data-pwned" not in dom.body_attrs  # and never executed
    assert "script" not in dom.tags and "img" not in dom.tags
