"""Processes left running by a container hook and by the agent try to take over the tool's own commands.

Found by the twelfth round's second helper: between a pipeline's steps the tool ran its killer
(`python3 -c 'os.kill(-1, SIGKILL)'`) and its listing of the step's files (`find`), after a
container hook its look for the hook's outputs (`sh -c stat`), all as the sandbox user, readable
programs without the agent's seccomp filter: a leftover attached to them with ptrace, made a
vsock socket and an io_uring through them, and turned the killer's kill into a getpid so that it
lived on into the next step. As root inside (`sandbox.user: "0:0"`) even the execute-only
interpreter was traceable: root owned it, so could read it. Now each of the tool's commands runs
by the execute-only interpreter and starts nothing else, and that interpreter is mode 0111.

Here a container `before_each` hook and step 1's agent each leave a watcher running
(probes/hook_watch.py) that `PTRACE_SEIZE`s every process of its user with fewer seccomp filters
than its own, as uid 1000 and as root.

A third helper then killed those commands instead (a signal from the same user, which being
non-dumpable does not stop): the killer died before it killed, the listing before it listed, and
the tool took an empty change and went on to step 2 with the leftover alive. Now a killer that
does not say none is left, or a listing that does not finish, ends the pipeline in an error.
Stopped rather than killed, those commands were each waited for in full, and the reaper that
resumes a sandbox for an `after_each` hook was tried 20 times: a 60 s case took 399 s. Now the
killer has 10 s and a reaper that never ends is not tried again (43 s).

Promise attacked: what a pipeline's step leaves running cannot write or count in the next, and
nothing of the case's reaches io_uring or vsock.
"""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from tests.integration.e2e.conftest import EvalProject

from .conftest import (
    PROBES,
    AttackRun,
    bash,
    final,
    is_gvisor,
    make_project,
    record_fact,
    records,
    run_attack,
    write_eval,
)

pytestmark = pytest.mark.docker

HOOK_LOG, AGENT_LOG = "/workspace/.watch-hook.log", "/workspace/.watch-agent.log"
STOPPER_TIMEOUT_S = 60


def _start(log: str) -> str:
    args = shlex.quote(json.dumps({"log": log, "seconds": 90}))
    return f"setsid python3 /workspace/watch.py {args} > /dev/null 2>&1 < /dev/null & sleep 1; echo watching"


@pytest.fixture(scope="module", params=["1000:1000", "0:0"], ids=["uid1000", "root"])
def hijack_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    user = request.param
    label = "hijack-root" if user == "0:0" else "hijack"
    project = make_project(tmp_path_factory, label, runtime)
    # Bash is allowed, not bypassed: the CLI refuses to bypass permissions as root.
    write_eval(project, f"""
        name: attack-leftover-hijack
        models: {{skill: claude-sonnet-4-6}}
        permissions: {{allow: ["Bash"]}}
        dataset: {{path: cases, workspace: {{files: [watch.py]}}}}
        execution:
          timeout: 120
          steps:
            - {{id: first, prompt: "start"}}
            - {{id: second, prompt: "look"}}
        hooks:
          before_each:
            - scope: container
              command: {json.dumps(_start(HOOK_LOG))}
          after_each:
            - scope: container
              command: 'cat {HOOK_LOG} {AGENT_LOG}'
    """, runtime, sandbox=f'user: "{user}"')
    first = [bash(_start(AGENT_LOG)), final("first done")]
    second = [bash("sleep 1; echo looked"), final("second done")]
    project.case("c1", {"q": "x"}, files={
        "watch.py": (PROBES / "hook_watch.py").read_text(),
        "model_script.first.yaml": yaml.safe_dump(first, sort_keys=False),
        "model_script.second.yaml": yaml.safe_dump(second, sort_keys=False),
    })
    return run_attack(project, runtime, label, "--offline")


def test_no_leftover_attaches_to_the_tools_commands(hijack_run: AttackRun) -> None:
    log = (hijack_run.result.run_dir / "hooks" / "after_each.c1.0.log").read_text()
    found = records(log)
    assert [r for r in found if r["probe"] == "watch"], log[-2000:]  # both watchers ran
    met = [r for r in found if r["probe"] == "met"]
    attached = [r for r in met if r["attached"]]
    label = "root" if "hijack-root" in hijack_run.run_id else "uid 1000"
    record_fact(f"leftover watchers ({label}): processes met with fewer filters / attached", hijack_run.runtime,
                f"{len(met)} / {len(attached)}: " + ", ".join(sorted({r["name"] for r in met})))
    if is_gvisor(hijack_run.runtime):
        return  # no seccomp fields to compare under gVisor, and neither vsock nor io_uring to reach
    assert attached == [], attached
    # They did look: the tool's commands (the look after the hook, the killer and the listing at
    # each step's end) passed them with Docker's filter alone, and refused them.
    assert any(r["error"] == "EPERM" and r["name"] == "python3-agent-e" for r in met), met


def test_the_watcher_of_step_one_neither_wrote_nor_counted_in_step_two(hijack_run: AttackRun) -> None:
    entry = hijack_run.entry("c1")
    steps = {step["step_id"]: step for step in entry["steps"]}
    assert steps["first"]["exit_code"] == 0 and steps["second"]["exit_code"] == 0, entry
    assert not any(".watch" in path for path in steps["second"].get("files", [])), steps["second"]


@pytest.fixture(scope="module")
def killer_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "toolkill", runtime)
    write_eval(project, """
        name: attack-tool-killer
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases, workspace: {files: [kill.py]}}
        execution:
          timeout: 120
          steps:
            - {id: first, prompt: "start"}
            - {id: second, prompt: "look"}
    """, runtime)
    _tool_killer_case(project, {"seconds": 90}, "echo killing", "ps -eo args > ps2.txt; cat ps2.txt")
    return run_attack(project, runtime, "toolkill", "--offline")


def _tool_killer_case(project: EvalProject, probe_args: dict[str, object], said: str, second_step: str) -> None:
    """Case c1: step 1 writes made.txt and leaves the tool_killer probe running (`probe_args`), then
    says `said`; step 2 runs `second_step`."""
    start = (f"echo made > made.txt; setsid python3 /workspace/kill.py {shlex.quote(json.dumps(probe_args))} "
             f"> /dev/null 2>&1 < /dev/null & sleep 1; {said}")
    first = [bash(start), final("first done")]
    second = [bash(second_step), final("second done")]
    project.case("c1", {"q": "x"}, files={
        "kill.py": (PROBES / "tool_killer.py").read_text(),
        "model_script.first.yaml": yaml.safe_dump(first, sort_keys=False),
        "model_script.second.yaml": yaml.safe_dump(second, sort_keys=False),
    })


def test_a_leftover_that_kills_the_tools_commands_stops_the_pipeline_or_dies(killer_run: AttackRun) -> None:
    entry = killer_run.entry("c1")
    steps = {step["step_id"]: step for step in entry["steps"]}
    first = steps["first"]
    record_fact("a leftover killing the tool's commands: step one ended / step two", killer_run.runtime,
                f"{first['end_reason']} ({(first.get('error') or '')[:60]}) / {steps['second'].get('skipped') or 'ran'}")
    if first["end_reason"] == "exited":
        # The killer won the race: then the leftover is gone before step 2, and step 1's files are true.
        assert "made.txt" in first["files"], first
        assert not any("kill.py" in call.output for call in killer_run.calls("c1")[1:]), "the leftover lived on"
    else:
        # It lost: the step says why, no later step runs in the sandbox, and the case is not complete.
        assert first["end_reason"] == "error" and "could not be" in (first.get("error") or ""), first
        assert steps["second"].get("skipped"), steps["second"]
        assert entry["completed"] is False, entry


@pytest.fixture(scope="module")
def stopper_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    """The third helper's other road: the leftover stops the tool's commands instead of killing them
    (for ten times the case's timeout), and a container `after_each` hook makes the tool resume the
    sandbox after the step's error."""
    project = make_project(tmp_path_factory, "toolstop", runtime)
    write_eval(project, f"""
        name: attack-tool-stopper
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases, workspace: {{files: [kill.py]}}}}
        execution:
          timeout: {STOPPER_TIMEOUT_S}
          steps:
            - {{id: first, prompt: "start"}}
            - {{id: second, prompt: "look"}}
        hooks:
          after_each:
            - scope: container
              command: 'echo after-each-ran'
    """, runtime)
    _tool_killer_case(project, {"seconds": 10 * STOPPER_TIMEOUT_S, "signal": "STOP"}, "echo stopping",
                      "echo second > second.txt")
    return run_attack(project, runtime, "toolstop", "--offline")


def test_a_leftover_that_stops_the_tools_commands_ends_the_case_by_its_deadline(stopper_run: AttackRun) -> None:
    """Before: each stopped command was waited for in full (the killer 60 s, then the resumed
    sandbox's reaper 20 times 15 s): the 60 s case took 400 s and more. Now the killer has 10 s,
    its own killer 15, and a reaper that never ends is not tried again."""
    entry = stopper_run.entry("c1")
    steps = {step["step_id"]: step for step in entry["steps"]}
    record_fact("a leftover stopping the tool's commands: the case's duration / its timeout", stopper_run.runtime,
                f"{entry['duration_s']:.0f} / {STOPPER_TIMEOUT_S} s")
    first = steps["first"]
    if first["end_reason"] == "exited":  # the killer won the race (it may, under gVisor)
        assert steps["second"]["exit_code"] == 0, steps["second"]
    else:
        assert first["end_reason"] == "error" and "could not be ended" in (first.get("error") or ""), first
        assert steps["second"].get("skipped"), steps["second"]
        assert entry["completed"] is False, entry
    assert entry["duration_s"] < STOPPER_TIMEOUT_S + 30, entry["duration_s"]
    assert "Docker daemon" not in stopper_run.result.process.stderr, stopper_run.result.process.stderr[-2000:]
