"""Deadlines and interruption of real runs: nothing outlives the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.docker_objects import containers_of_run, objects_of_run, paused_containers_of_run

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"


def _sleeper_project(project, timeout: int) -> None:
    project.eval_yaml(f"""
        name: e2e-deadline
        execution: {{skill: scribe, arguments: "{{task}}", timeout: {timeout}, parallelism: 2}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        outputs: [{{path: out}}]
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    command = "mkdir -p out && echo partial > out/partial.txt && (sleep 9999 &) && sleep 9999"
    for case_id in ("slow-1", "slow-2"):
        project.case(case_id, {"task": "wait"}, script=[{"tool": "Bash", "input": {"command": command}}, {"text": "x"}])


def _start_run(project, run_id: str, **popen: object) -> subprocess.Popen:
    """The CLI's run of the project in the background, offline, without the caller's credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.Popen(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline",
         "--runs-dir", str(project.runs), "--run-id", run_id],
        env=env, cwd=project.root, **popen,
    )


def _interrupt(process: subprocess.Popen) -> tuple[str, float]:
    """Ctrl-C the run: its stderr, and the seconds from the signal to its exit."""
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    return stderr, time.monotonic() - interrupted


def test_sleep_past_the_deadline_ends_by_the_deadline_and_keeps_partial_results(project):
    _sleeper_project(project, timeout=6)
    started = time.monotonic()
    result = project.run("--offline", "--run-id", "deadline-run")
    elapsed = time.monotonic() - started
    # No case completed: the run fails, thresholds or not (never green having checked nothing).
    assert result.process.returncode == 1, result.process.stderr
    assert json.loads(result.process.stdout)["score"]["cases"]["completed"] == 0
    for case_id in ("slow-1", "slow-2"):
        entry = result.case_result(case_id)
        assert entry["end_reason"] == "timed_out" and entry["exit_code"] == -1
        assert "deadline" in entry["limits_hit"]
        assert 6 <= entry["agent_duration_s"] < 6 + 5
        # the workspace as it was at the deadline is collected
        assert (result.case(case_id) / "out" / "partial.txt").read_text() == "partial\n"
        assert "timed out after 6s" in (result.case(case_id) / "stderr.log").read_text()
    assert elapsed < 60
    assert objects_of_run("deadline-run") == []


def test_sigint_mid_run_removes_every_container_within_seconds(project):
    _sleeper_project(project, timeout=600)
    process = _start_run(project, "sigint-run", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = containers_of_run("sigint-run", running_only=True)
            if len(running) == 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the run never had two sandboxes running")
        time.sleep(3)  # let the agents get into their sleep
        stderr, took = _interrupt(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert took < 15
    assert objects_of_run("sigint-run") == []


def test_kill_9_leaves_orphans_that_the_next_run_reaps(project):
    _sleeper_project(project, timeout=600)
    process = _start_run(project, "killed-run", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(objects_of_run("killed-run")) < 2:
        time.sleep(0.2)
    time.sleep(2)
    process.kill()
    process.wait()
    assert objects_of_run("killed-run"), "kill -9 should leave the sandboxes behind for the reaper"
    # ... but none keeps running: each stops itself once its controller is gone
    killed = time.monotonic()
    while containers_of_run("killed-run", running_only=True) and time.monotonic() - killed < 15:
        time.sleep(0.2)
    assert containers_of_run("killed-run", running_only=True) == []
    # the next run (of anything) reaps the orphans of the dead controller first
    project.eval_yaml(project.root.joinpath("eval.yaml").read_text().replace("timeout: 600", "timeout: 30"))
    for case_id in ("slow-1", "slow-2"):
        (project.root / "cases" / case_id / "model_script.yaml").write_text("- text: quick\n")
    result = project.run("--offline", "--run-id", "next-run")
    assert result.process.returncode == 0, result.process.stderr
    assert "removed orphaned container" in result.process.stderr
    assert objects_of_run("killed-run") == []


def test_container_after_each_runs_after_the_deadline_with_the_agent_gone(project):
    project.eval_yaml("""
        name: e2e-deadline-hooks
        execution: {skill: scribe, arguments: "{task}", timeout: 5}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
        hooks:
          after_each:
            - scope: container
              command: 'cat partial.txt; ps -eo pid,args | grep -c "[s]leep 7777" || true'
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    command = "echo partial > partial.txt && (setsid sleep 7777 &) && sleep 7777"
    project.case("c1", {"task": "wait"}, script=[{"tool": "Bash", "input": {"command": command}}, {"text": "x"}])
    result = project.run("--offline")
    assert result.process.returncode == 1, result.process.stderr  # its only case did not complete
    assert result.case_result("c1")["end_reason"] == "timed_out"
    log = (result.run_dir / "hooks" / "after_each.c1.0.log").read_text()
    assert "partial" in log
    assert log.strip().splitlines()[-1] == "0"  # every agent process (even a setsid one) was gone
    assert "after_each.c1.0" in result.process.stderr and "... OK" in result.process.stderr


def _heavy_case_interrupted(project, run_id: str, moment) -> tuple[dict, str, float]:
    """A case that leaves 40k files and is frozen at its deadline, Ctrl-C'd once `moment(run_dir)` holds:
    its run_result.json entry, the run's stderr, and the seconds from the signal to the run's exit."""
    project.eval_yaml("""
        name: e2e-sigint-collecting
        execution: {skill: scribe, arguments: "{task}", timeout: 20}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    command = "mkdir -p many && cd many && for i in $(seq 1 40000); do echo $i > f$i; done; sleep 9999"
    project.case("heavy", {"task": "fill"}, script=[{"tool": "Bash", "input": {"command": command}}, {"text": "x"}])
    run_dir = project.runs / "e2e-sigint-collecting" / run_id
    process = _start_run(project, run_id, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and process.poll() is None and not moment(run_dir):
            time.sleep(0.05)
        assert moment(run_dir), "the run never reached the moment to interrupt it"
        stderr, took = _interrupt(process)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert objects_of_run(run_id) == []
    return json.loads((run_dir / "cases" / "heavy" / "run_result.json").read_text()), stderr, took


def test_sigint_while_a_case_with_many_files_is_copied_out_ends_the_run_within_seconds(project):
    """A case frozen at its deadline is being copied out (40k files) when Ctrl-C comes: the run
    ends promptly, the case `interrupted`, however much the agent left (the fourteenth round's A9)."""
    frozen_at: list[float] = []

    def into_the_copy_out(_run_dir) -> bool:
        if not frozen_at and paused_containers_of_run("sigint-copying"):
            frozen_at.append(time.monotonic())
        return bool(frozen_at) and time.monotonic() - frozen_at[0] > 0.5

    entry, _, took = _heavy_case_interrupted(project, "sigint-copying", into_the_copy_out)
    assert took < 8, f"the run took {took:.1f} s to end after Ctrl-C"
    assert entry["end_reason"] == "interrupted", entry
    assert "copy-out stopped" in entry["error"]


def test_sigint_while_the_files_of_a_case_are_compared_and_copied_ends_the_run_within_seconds(project):
    """Past the copy-out, the case's 40k files are compared, copied to `_modified/` and diffed on the host.
    Fixed: that did not look at the interrupt, and held the run's end for up to 17 s after Ctrl-C."""
    entry, _, took = _heavy_case_interrupted(project, "sigint-collecting",
                                             lambda run_dir: (run_dir / "cases" / "heavy" / "_modified").is_dir())
    assert took < 8, f"the run took {took:.1f} s to end after Ctrl-C"
    assert entry["end_reason"] == "interrupted", entry
    assert entry["error"].startswith("collecting the case's files stopped"), entry
    assert entry["changes"]["counts"]["added"] == 40000
