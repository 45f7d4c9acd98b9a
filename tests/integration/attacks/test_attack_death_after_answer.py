"""The agent's sandbox dies as its case ends: the case must end, and never as a clean run
(found by an outside red team).

A process the agent left behind starts a fork bomb moments after the final answer.
Under gVisor the pids limit takes the whole sandbox down; when that happened just
as the host started its counters' probe, the probe's output stream stayed open for
good (docker-py reads it without a timeout): the case never ended, past its
deadline, and the run waited for it through Ctrl-C. Now the host's own short
commands in a sandbox give up after a while, and a sandbox found stopped under
its case makes the case an error.

Promises attacked: a case ends by its deadline; no green for work that did not happen.
"""

from __future__ import annotations

import json

import pytest

from .conftest import AttackRun, bash, final, is_gvisor, make_project, run_attack, write_eval

pytestmark = pytest.mark.docker

DELAYS = ("0", "0.5", "1")
DEADLINE_S = 60
# A case stopped at its deadline ends within this of it (freeze, copy-out, removal).
DEADLINE_SLACK_S = 15


@pytest.fixture(scope="module")
def late_bomb_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "rt7late", runtime)
    write_eval(project, f"""
        name: rt7-late-death
        execution: {{prompt: "{{q}}", timeout: {DEADLINE_S}}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        parallelism: 2
        judges:
          - name: said_done
            check: |
              return ("all work done" in outputs["conversation"], "looked for the final answer")
    """, runtime, sandbox="""
        memory: 1g
        pids: 512
    """)
    for delay in DELAYS:
        project.case(f"bomb-after-{delay}", {"q": "go"}, script=[
            bash(f"setsid nohup sh -c 'sleep {delay}; b(){{ b|b & }}; b' >/dev/null 2>&1 & echo armed",
                 timeout_ms=60_000),
            final("all work done"),
        ])
    # Three cases of a few seconds each: a case that outlives its deadline makes the run outlive this.
    return run_attack(project, runtime, "rt7late", "--offline", timeout=2 * DEADLINE_S + 60)


@pytest.mark.parametrize("delay", DELAYS)
def test_a_sandbox_dying_as_its_case_ends_ends_the_case(late_bomb_run: AttackRun, delay: str) -> None:
    case_id = f"bomb-after-{delay}"
    entry = late_bomb_run.entry(case_id)
    verdict = json.loads((late_bomb_run.result.run_dir / "summary.json").read_text())["per_case"][case_id]["said_done"]
    if entry["end_reason"] == "timed_out":
        # Under runc the bomb can leave the CLI unable to exit after it printed its answer (seen with no
        # delay: the answer 24 s in, then nothing): the deadline ends the case, and it is not clean.
        assert not is_gvisor(late_bomb_run.runtime), entry
        assert entry["duration_s"] < DEADLINE_S + DEADLINE_SLACK_S, entry
        assert {"deadline", "pids"} <= set(entry["limits_hit"]), entry
        assert verdict.get("incomplete") is True, verdict
        return
    assert entry["duration_s"] < DEADLINE_S, entry
    if entry["end_reason"] == "error":
        # Under gVisor the bomb takes the sandbox down; the case says so (runc only refuses forks).
        assert is_gvisor(late_bomb_run.runtime), entry
        assert "stopped while a command ran" in (entry["error"] or ""), entry
        # What a dead sandbox left cannot be trusted: not judged, which counts as failing.
        assert verdict["status"] == "not_run" and verdict["value"] is None, verdict
        return
    if entry["end_reason"] == "exited" and entry["exit_code"] == 0:
        # The bomb went off after the host had what it needed: the agent's work was done and said so.
        assert entry["result"] == "all work done", entry
        assert verdict["value"] is True and not verdict.get("incomplete"), verdict
        return
    # Under runc the bomb filled the pids table (seen with no delay): the CLI aborts when it cannot make
    # a thread, before its last turn (no result) or just after printing it (exit 134 with the answer
    # out). Either way the case ends at once, not clean, says which limit it hit, and its judged
    # result is marked incomplete: never shown as a clean run.
    assert not is_gvisor(late_bomb_run.runtime), entry
    assert entry["end_reason"] in ("signaled", "exited") and entry["exit_code"] != 0, entry
    assert "pids" in entry["limits_hit"] and entry["result"] in (None, "all work done"), entry
    assert verdict.get("incomplete") is True, verdict
