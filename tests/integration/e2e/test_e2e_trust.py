"""Results a user can trust, on real runs: no green from cases that never ran or never finished, and an
interrupted run that says so. The real CLI in the real sandbox; the model is scripted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from tests.docker_objects import containers_of_run, objects_of_run

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"
# The judges that used to pass a case that did nothing: no tool calls to validate, nothing spent.
VACUOUS_JUDGES = """
judges:
  - name: tools_ok
    builtin: process/tool_call_validation
  - name: cheap
    builtin: efficiency/cost_budget
    arguments: {max_cost_usd: 1.0}
thresholds:
  tools_ok: {min_pass_rate: 1.0}
  cheap: {min_pass_rate: 1.0}
"""


def _project(project, *, timeout: int = 120, parallelism: int = 1, extra: str = "") -> None:
    project.eval_yaml(textwrap.dedent(f"""
        name: e2e-trust
        execution: {{skill: scribe, arguments: "{{task}}", timeout: {timeout}, parallelism: {parallelism}}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        outputs: [{{path: out}}]
    """) + extra)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)


def test_a_run_whose_cases_all_hit_a_zero_budget_fails_its_gates_and_exits_non_zero(project):
    """Issue 13: with `--max-budget 0` every case ended budget_exhausted and those two judges said 100 %."""
    _project(project, extra=VACUOUS_JUDGES)
    script = [{"tool": "Bash", "input": {"command": "echo hi > out/x.txt"}}, {"text": "done"}]
    for case_id in ("c1", "c2"):
        project.case(case_id, {"task": "write"}, script=script)
    result = project.run("--offline", "--max-budget", "0", "--run-id", "zero-budget")

    assert result.process.returncode == 1, result.process.stderr
    document = json.loads(result.process.stdout)
    score = document["score"]
    assert score["cases"]["planned"] == 2 and score["cases"]["completed"] == 0
    for case_id in ("c1", "c2"):
        assert result.case_result(case_id)["end_reason"] == "budget_exhausted"
        tools_ok, cheap = score["per_case"][case_id]["tools_ok"], score["per_case"][case_id]["cheap"]
        assert tools_ok["status"] == "error" and tools_ok["error"].startswith("nothing to judge")
        assert tools_ok["incomplete"] is True and tools_ok["end_reason"] == "budget_exhausted"
        assert cheap["value"] is False and "stopped by its budget" in cheap["rationale"]
    assert score["judges"]["tools_ok"]["pass_rate"] is None and score["judges"]["cheap"]["pass_rate"] == 0.0
    assert len(score["regressions"]) == 2
    junit = ET.parse(result.run_dir / "junit.xml").getroot()
    times = [float(case.get("time")) for case in junit.iter("testcase") if case.get("name") in ("c1", "c2")]
    assert times and all(t > 0 for t in times)  # each case's real time, not 0


def test_the_terminal_lists_the_failures_and_the_unfinished_cases_then_the_run_directory(project):
    _project(project, timeout=8, extra="""
judges:
  - name: wrote
    check: |
      return "out/x.txt" in outputs["files"], "looked for out/x.txt"
thresholds:
  wrote: {min_pass_rate: 1.0}
""")
    project.case("writes", {"task": "write"},
                 script=[{"tool": "Bash", "input": {"command": "echo hi > out/x.txt"}}, {"text": "done"}])
    project.case("idles", {"task": "idle"}, script=[{"text": "I will not write anything."}])
    hang = "mkdir -p out && echo partial > out/partial.txt && (sleep 9999 &) && sleep 9999"
    project.case("hangs", {"task": "hang"}, script=[{"tool": "Bash", "input": {"command": hang}}, {"text": "x"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline",
         "--runs-dir", str(project.runs), "--run-id", "listed"],
        capture_output=True, text=True, timeout=300, env=env, cwd=project.root,
    )
    out = process.stdout
    assert process.returncode == 1, process.stderr
    assert "  idles × wrote: FAIL — looked for out/x.txt" in out
    assert "NOT COMPLETED: 1 of 3 cases" in out and "  hangs: timed_out after" in out, out
    run_dir = project.runs / "e2e-trust" / "listed"
    lines = out.splitlines()
    assert f"run directory: {run_dir}" in lines
    assert lines.index("FAILURES: 2 (case × judge)") < lines.index(f"run directory: {run_dir}")
    assert "pass_rate=33.3% (1 of 3 cases passed;" in out
    assert "(scripted: offline run" in out


def test_ctrl_c_mid_run_leaves_a_marked_record_and_score_keeps_the_planned_denominator(project):
    _project(project, timeout=600, parallelism=2, extra="""
judges:
  - name: wrote
    check: |
      return "out/partial.txt" in outputs["files"], "looked for out/partial.txt"
thresholds:
  wrote: {min_pass_rate: 1.0}
""")
    command = "mkdir -p out && echo partial > out/partial.txt && sleep 9999"
    for case_id in ("a-slow", "b-slow", "c-queued"):
        project.case(case_id, {"task": "wait"}, script=[{"tool": "Bash", "input": {"command": command}}, {"text": "x"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline",
         "--runs-dir", str(project.runs), "--run-id", "ctrl-c"],
        env=env, cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while len(containers_of_run("ctrl-c", running_only=True)) < 2:
            assert time.monotonic() < deadline, "the run never had two sandboxes running"
            time.sleep(0.2)
        time.sleep(4)  # the agents are in their sleep, having written out/partial.txt
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    run_dir = project.runs / "e2e-trust" / "ctrl-c"
    assert f"run directory: {run_dir}" in stdout and "INTERRUPTED: 0 of 3 cases finished" in stdout
    assert "c-queued" in stdout  # the final table stays on screen with every case
    assert objects_of_run("ctrl-c") == []

    recorded = json.loads((run_dir / "run_result.json").read_text())
    assert (recorded["interrupted"], recorded["planned"], recorded["finished"]) == (True, 3, 0)
    assert recorded["end_reasons"] == {"a-slow": "interrupted", "b-slow": "interrupted", "c-queued": "interrupted"}
    queued = json.loads((run_dir / "cases" / "c-queued" / "run_result.json").read_text())
    assert queued["end_reason"] == "interrupted" and queued["ran"] is False

    scored = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "score", str(run_dir), "--json"],
        capture_output=True, text=True, timeout=120, env=env, cwd=project.root,
    )
    assert scored.returncode == 1, scored.stderr
    summary = json.loads(scored.stdout)
    assert summary["cases"]["interrupted"] is True and summary["cases"]["planned"] == 3
    # a case killed by Ctrl-C left out/partial.txt, but it never counts as a pass
    assert {c: r["wrote"]["status"] for c, r in summary["per_case"].items()} == dict.fromkeys(
        ("a-slow", "b-slow", "c-queued"), "not_run")
    assert summary["judges"]["wrote"]["total_cases"] == 3 and summary["judges"]["wrote"]["pass_rate"] is None
