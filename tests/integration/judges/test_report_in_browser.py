"""report.html opened in headless Chromium: every case is shown, hostile text never runs."""

from __future__ import annotations

import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent_eval_sandbox.app.score import score_run
from tests.unit.judges.rundir_fixture import case_result, make_project, make_run

SCRIPT = "<script>document.body.setAttribute('data-pwned','yes')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
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


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.body_attrs: dict[str, str | None] = {}
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "body":
            self.body_attrs = dict(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.chromium
def test_the_report_shows_every_case_and_runs_no_untrusted_script(tmp_path: Path, chromium: str) -> None:
    config = make_project(tmp_path, EVAL, {case: {} for case in CASES})
    cases = {
        case: {"run_result.json": case_result(), "artifacts/out.md": f"{SCRIPT}{IMG} from {case}", "stdout.log": "{}"}
        for case in CASES[:-1]
    }
    cases["timeout-case"] = {"run_result.json": case_result(end_reason="timed_out", exit_code=-1)}
    run = make_run(tmp_path, config, cases)
    result = score_run(run)
    completed = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + str(tmp_path / "profile"),
         "--dump-dom", result.reports.html.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    dom = _Dom()
    dom.feed(completed.stdout)
    text = "".join(dom.text)
    for case in CASES:
        assert case in text, f"case {case!r} missing from the rendered report"
    assert "Browser check" in text and "timed_out" in text and "REGRESSION" not in text
    assert SCRIPT in text and "artifact says:" in text  # shown as text
    assert "data-pwned" not in dom.body_attrs  # and never executed
    assert "script" not in dom.tags and "img" not in dom.tags
