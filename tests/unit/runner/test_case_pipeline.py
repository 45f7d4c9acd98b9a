"""One case through runner/case.py on the fake sandbox backend.

The model is the scripted server behind the real gateway; the agent is
`FakeCli`, which talks to it through the case's gateway socket. Each test
breaks one stage and checks that the case still ends in its outcome, its
sandbox destroyed and after_each run.
"""

from __future__ import annotations

import dataclasses
import errno
import json
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import DockerUnavailableError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.lifecycle.container import CONFINED
from agent_eval_sandbox.lifecycle.outputs import HookOutputs
from agent_eval_sandbox.runner import case, collect
from agent_eval_sandbox.sandbox.base import SandboxError
from agent_eval_sandbox.sandbox.fake import ExecCall, FakeSandbox, Reply
from tests.unit.runner.fake_cli import is_agent

AFTER_EACH_MARK = "after-each.txt"


def _kinds(sandbox) -> list[str]:
    return [action.kind for action in sandbox.actions]


def _after_each_hook(marks: Path) -> str:
    """A host after_each hook that records which workspace it was given, and what the agent left in it."""
    return f"""
hooks:
  after_each:
    - command: 'echo "$CASE_ID $(cat "$CASE_WORKSPACE/out/hello.txt" 2>/dev/null || echo no-output)" >> {marks}'
"""


def _no_sandbox_left(backend) -> None:
    assert backend.live == []
    assert all(sandbox.destroyed for sandbox in backend.created)
    assert all(not sandbox.root.exists() for sandbox in backend.created)


# ---- the whole pipeline ------------------------------------------------------------------------


def test_a_case_runs_every_stage_in_order_and_ends_in_its_written_outcome(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    eval_project.case("c1")
    seen: dict[str, object] = {}

    def look(call: ExecCall) -> None:
        seen.update(seed=call.read("seed.txt"), input=call.read("input.yaml"), cwd=call.cwd, env=dict(call.env))
        call.write("notes.md", "written by the agent itself\n")

    cli.before = look
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    # prepare → sandbox → agent → copy out → destroy, in that order
    (sandbox,) = backend.created
    assert _kinds(sandbox) == ["create", "copy_in", "exec", "copy_out", "copy_out", "destroy"]
    assert sorted(a.detail for a in sandbox.did("copy_out")) == [f"{paths.HOME}/.claude/projects", paths.WORKSPACE]
    # ...the very paths it said before the agent it would copy out (a backend may take them as the agent exits)
    assert [sorted(expected) for expected in sandbox.expected_copy_outs] == [sorted(a.detail for a in
                                                                              sandbox.did("copy_out"))]
    assert sandbox.spec.image == "fake-image" and sandbox.spec.run_id == "r1" and sandbox.spec.case_id == "c1"
    assert {m.target for m in sandbox.spec.mounts} == {paths.RUN_DIR, paths.MANAGED_SETTINGS}
    _no_sandbox_left(backend)
    # the agent got the staged workspace, the prompt, and an environment without the host's key
    assert seen["seed"] == b"seed\n" and b"task: go" in seen["input"] and seen["cwd"] == paths.WORKSPACE
    env = seen["env"]
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{paths.FORWARDER_PORT}" and env["HOME"] == paths.HOME
    (call,) = cli.calls
    assert call.arg_after("--model") == "claude-sonnet-4-6"

    assert outcome.end_reason == "exited" and outcome.exit_code == 0 and outcome.error is None
    assert outcome.result == "c1 done" and outcome.num_turns == 2
    assert outcome.gateway.requests == 2 and outcome.gateway.spent_usd > 0 and outcome.cost_usd > 0
    assert sorted(outcome.changes.added) == ["notes.md", "out/hello.txt"] and outcome.changes.modified == []
    assert outcome.integrity.checked and outcome.integrity.dropped == 0
    case = pipeline.case_dir("c1")
    # collect: the outcome is the case's run_result.json, and the files it speaks of are there
    assert json.loads(case.result.read_text()) == outcome.to_data()
    assert (case.path / "out" / "hello.txt").read_text() == "hi from c1"
    assert (case.modified / "notes.md").read_text() == "written by the agent itself\n"
    assert "+written by the agent itself" in case.workspace_diff.read_text()
    events = json.loads(case.events.read_text())
    assert [e["type"] for e in events] == ["system", "assistant", "tool_result", "assistant", "result"]
    assert events[1]["tools"][0]["name"] == "Write" and events[2]["content"].startswith("File created")
    transcript = [json.loads(line) for line in case.transcript.read_text().splitlines()]
    assert transcript and all(line["sessionId"] == outcome.session_id for line in transcript)
    assert len(case.gateway_log.read_text().splitlines()) == 2
    assert case.input.read_text() == "task: go\n"


def test_hook_outputs_and_hook_made_files_reach_the_agent(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml("""
        hooks:
          before_each:
            - command: >-
                echo "prepared for $CASE_ID" > prepared.txt;
                printf "env: {GREETING: from-case}\\ndata: {rows: 3}\\n" > .hook-outputs.yaml
            - scope: container
              command: 'echo in the sandbox'
    """)
    eval_project.case("c1")
    seen: dict[str, object] = {}
    container_hooks: list[ExecCall] = []

    def look(call: ExecCall) -> None:
        seen.update(env=dict(call.env), prepared=call.read("prepared.txt"),
                    leftover=call.host_path(".hook-outputs.yaml").exists())

    def container_hook(call: ExecCall) -> Reply:
        if call.cmd[-3:-1] == ("bash", "-c"):
            container_hooks.append(call)
        return Reply()

    cli.before, cli.others = look, container_hook
    pipeline = make_pipeline()
    pipeline.ctx = dataclasses.replace(pipeline.ctx, global_hook_outputs=HookOutputs(
        env={"GREETING": "from-all", "GLOBAL": "g"}))
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "exited", outcome.error
    assert seen["env"]["GREETING"] == "from-case" and seen["env"]["GLOBAL"] == "g"  # the case's outputs win
    assert seen["prepared"] == b"prepared for c1\n" and seen["leftover"] is False
    (hook,) = container_hooks
    assert hook.cmd[:4] == CONFINED and hook.cmd[-1] == "echo in the sandbox" and hook.env["CASE_ID"] == "c1"
    (sandbox,) = backend.created
    # the container hook, the look for its outputs, then the agent
    assert [a.detail for a in sandbox.did("exec")] == [CONFINED[0], CONFINED[0], "/usr/bin/python3-agent-eval"]
    assert "rows: 3" in pipeline.case_dir("c1").hook_outputs.read_text()
    assert "prepared.txt" not in outcome.changes.added  # the hook's file was there before the agent
    _no_sandbox_left(backend)


def test_after_each_runs_on_the_collected_workspace_when_the_agent_fails(eval_project, make_pipeline, backend, cli,
                                                                         tmp_path):
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks) + """
    - scope: container
      command: 'echo cleanup'
""")
    eval_project.case("c1")
    cli.exit_code = 3
    outcome = make_pipeline().run("c1")

    assert outcome.end_reason == "exited" and outcome.exit_code == 3
    assert marks.read_text() == "c1 hi from c1\n"
    (sandbox,) = backend.created
    # the container hook ran after copy-out, before the sandbox went
    assert _kinds(sandbox)[-4:] == ["copy_out", "copy_out", "exec", "destroy"]
    assert sandbox.did("exec")[1].detail == CONFINED[0]
    _no_sandbox_left(backend)


# ---- error paths: the case's own error, its sandbox gone, after_each run ----------------------------


def test_a_sandbox_that_breaks_under_the_agent_is_the_cases_error(eval_project, make_pipeline, backend, cli,
                                                                  tmp_path):
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks))
    eval_project.case("c1")

    def broken(call: ExecCall) -> None:
        raise SandboxError("the daemon lost the container")

    cli.before = broken
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "error" and outcome.exit_code is None
    assert outcome.error == "the daemon lost the container"
    assert json.loads(pipeline.case_dir("c1").result.read_text())["error"] == "the daemon lost the container"
    assert "ERROR: the daemon lost the container" in pipeline.case_dir("c1").stderr_log.read_text()
    assert marks.read_text() == "c1 no-output\n"  # after_each ran, on the workspace as staged
    _no_sandbox_left(backend)


def test_a_failed_copy_out_is_the_cases_error_even_though_the_agent_exited(eval_project, make_pipeline, backend, cli,
                                                                           tmp_path):
    """Fixed: the case used to end `exited` with exit code 0, its outputs silently missing."""
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks))
    eval_project.case("c1")

    def agent_then_vanish(call: ExecCall):
        reply = cli(call)
        if is_agent(call):
            call.sandbox.vanish()
        return reply

    backend.behaviour = agent_then_vanish
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "error" and "vanished" in outcome.error
    assert outcome.exit_code == 0  # what the agent's command did is still told
    assert outcome.changes.added == [] and not (pipeline.case_dir("c1").path / "out").exists()
    assert json.loads(pipeline.case_dir("c1").result.read_text())["end_reason"] == "error"
    assert marks.read_text() == "c1 no-output\n"
    _no_sandbox_left(backend)


def test_a_sandbox_that_cannot_be_created_is_an_infra_error_after_its_retries(eval_project, make_pipeline, backend,
                                                                               cli, tmp_path):
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks))
    eval_project.case("c1")
    tries: list[str] = []

    def no_room(spec) -> None:
        tries.append(spec.case_id)
        raise SandboxError("cannot create volumes: no space left on device")

    backend.on_create = no_room
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "infra_error" and "no space left" in outcome.error and "3 attempts" in outcome.error
    assert not outcome.ran and len(tries) == case.CREATE_ATTEMPTS
    assert cli.calls == [] and backend.created == []
    assert marks.read_text() == "c1 no-output\n"
    assert sum("retrying" in w for w in pipeline.warnings) == case.CREATE_ATTEMPTS - 1


@pytest.mark.parametrize("fails", ["create", "copy-in"])
def test_a_sandbox_that_fails_to_start_once_is_retried_and_the_case_runs(eval_project, make_pipeline, backend, cli,
                                                                         monkeypatch, fails):
    eval_project.eval_yaml()
    eval_project.case("c1")
    tries: list[str] = []

    def flaky(spec) -> None:
        tries.append(spec.case_id)
        if len(tries) == 1 and fails == "create":
            raise DockerUnavailableError("cannot reach the Docker daemon while creating sandbox: reset by peer")

    backend.on_create = flaky
    real_copy_in = FakeSandbox.copy_in

    def copy_in_fails_the_first_time(self, *args, **kwargs):
        if len(tries) == 1:
            raise SandboxError("copying into the sandbox failed: 500 Server Error")
        return real_copy_in(self, *args, **kwargs)

    if fails == "copy-in":
        monkeypatch.setattr(FakeSandbox, "copy_in", copy_in_fails_the_first_time)
    outcome = make_pipeline().run("c1")

    assert outcome.end_reason == "exited" and outcome.exit_code == 0 and outcome.error is None
    assert len(tries) == 2 and len(cli.calls) == 1  # the agent ran once, in the second sandbox
    assert backend.live == [] and all(s.destroyed for s in backend.created)


def test_the_agent_is_never_started_twice_even_when_its_sandbox_breaks(eval_project, make_pipeline, backend, cli):
    """Retries stop where money may have been spent: a sandbox that breaks under the agent is the case's error."""
    eval_project.eval_yaml()
    eval_project.case("c1")

    def break_under_the_agent(call):
        raise SandboxError("the daemon lost the container")

    cli.before = break_under_the_agent
    outcome = make_pipeline().run("c1")
    assert outcome.end_reason == "error" and "lost the container" in outcome.error
    assert len(cli.calls) <= 1 and len(backend.created) == 1


def test_a_case_that_cannot_be_prepared_is_its_own_error(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    eval_project.case("c1")
    (eval_project.root / "cases" / "c1" / "model_script.yaml").write_text("- {tool: Bash, input: [not, a, mapping]}\n")
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "error" and outcome.error.startswith("preparing the case failed: ConfigError")
    assert json.loads(pipeline.case_dir("c1").result.read_text())["end_reason"] == "error"
    assert "Traceback" in pipeline.case_dir("c1").stderr_log.read_text()
    assert cli.calls == [] and backend.created == []


def test_results_that_cannot_be_collected_are_the_cases_error(eval_project, make_pipeline, backend, cli, monkeypatch):
    eval_project.eval_yaml()
    eval_project.case("c1")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(collect, "collect_changes", disk_full)
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "error"
    assert outcome.error.startswith("collecting the case's results failed: OSError") and "No space" in outcome.error
    assert outcome.gateway.requests == 2  # what the case spent is still counted
    # its agent ran: the case is never recorded as one that did not (nor judged as never-ran)
    assert outcome.ran and outcome.exit_code == 0 and outcome.agent_duration_s is not None
    assert json.loads(pipeline.case_dir("c1").result.read_text())["error"] == outcome.error
    _no_sandbox_left(backend)


def test_a_failing_host_before_each_hook_skips_the_agent_and_its_sandbox(eval_project, make_pipeline, backend, cli,
                                                                         tmp_path):
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks) + """
  before_each:
    - command: 'echo "no fixture for $CASE_ID" >&2; exit 4'
""")
    eval_project.case("c1")
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "hook_failed" and outcome.exit_code is None
    assert "before_each" in outcome.error and "exit" in outcome.error
    assert cli.calls == [] and backend.created == []  # the sandbox is made only when something needs it
    assert marks.read_text() == "c1 no-output\n"
    assert "no fixture for c1" in (pipeline.ctx.run_dir.hooks / "before_each.c1.0.log").read_text()


def test_a_failing_container_before_each_hook_skips_the_agent_and_removes_the_sandbox(eval_project, make_pipeline,
                                                                                      backend, cli, tmp_path):
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks) + """
  before_each:
    - scope: container
      command: 'exit 1'
""")
    eval_project.case("c1")
    cli.others = lambda call: Reply(exit_code=1) if call.cmd[-3:-1] == ("bash", "-c") else Reply()
    outcome = make_pipeline().run("c1")

    assert outcome.end_reason == "hook_failed" and "before_each" in outcome.error
    assert cli.calls == []
    (sandbox,) = backend.created
    assert sandbox.did("exec")[0].detail == CONFINED[0]
    _no_sandbox_left(backend)
    assert marks.read_text() == "c1 no-output\n"


def test_a_case_begun_after_the_run_was_interrupted_runs_nothing(eval_project, make_pipeline, backend, cli,
                                                                 tmp_path):
    """Fixed: its before_each and after_each hooks (user commands on the host) used to run."""
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks) + f"""
  before_each:
    - command: 'echo before >> {marks}'
""")
    eval_project.case("c1")
    pipeline = make_pipeline()
    pipeline.ctx.cancelled.set()
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "interrupted" and outcome.error == "the run was interrupted before this case started"
    assert json.loads(pipeline.case_dir("c1").result.read_text())["end_reason"] == "interrupted"
    assert not marks.exists() and cli.calls == [] and backend.created == []
    assert not list(pipeline.ctx.staging.iterdir())  # not even staged


def test_a_case_interrupted_during_its_before_each_gets_no_sandbox_and_still_cleans_up(eval_project, make_pipeline,
                                                                                      backend, cli, tmp_path):
    marks = tmp_path / AFTER_EACH_MARK
    eval_project.eval_yaml(_after_each_hook(marks) + """
  before_each:
    - command: 'true'
""")
    eval_project.case("c1")
    pipeline = make_pipeline()
    pipeline.ctx.hooks.report = lambda result: pipeline.ctx.cancelled.set()  # Ctrl-C while the hook ran
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "interrupted" and outcome.error == "the run was interrupted before this case started"
    assert cli.calls == [] and backend.created == []
    assert marks.read_text() == "c1 no-output\n"  # it had begun: its after_each runs


def test_a_case_interrupted_while_its_files_are_collected_stops_there_and_ends_interrupted(
        eval_project, make_pipeline, backend, cli, monkeypatch):
    """Fixed: the collection of what was copied out did not look at the run's interrupt; 40,000 files an
    agent left held the run's end after Ctrl-C for 17 s (the diff's list lookups were quadratic too)."""
    eval_project.eval_yaml()
    eval_project.case("c1")
    cli.before = lambda call: [call.write(f"many/f{i}.txt", f"{i}\n") for i in range(20)] if is_agent(call) else None
    pipeline = make_pipeline()
    pipeline.interrupt_after_collecting(monkeypatch, 3)
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "interrupted", outcome
    assert outcome.error.startswith("collecting the case's files stopped after copying 3 of ")
    assert outcome.changes.counts["added"] >= 20  # the comparison was whole: it is listed
    case_dir = pipeline.case_dir("c1")
    assert len([p for p in (case_dir.path / "_modified").rglob("*") if p.is_file()]) == 3
    assert json.loads(case_dir.result.read_text())["end_reason"] == "interrupted"
    _no_sandbox_left(backend)


# ---- deadlines -----------------------------------------------------------------------------------


def test_a_hanging_agent_is_frozen_at_its_deadline_collected_as_it_was_and_removed(eval_project, make_pipeline,
                                                                                   backend, cli):
    eval_project.eval_yaml()
    eval_project.case("c1")
    cli.hang = True
    pipeline = make_pipeline(timeout=1)
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "timed_out" and outcome.exit_code == -1 and "deadline" in outcome.limits_hit
    assert 1.0 <= outcome.agent_duration_s < 10
    (sandbox,) = backend.created
    assert _kinds(sandbox) == ["create", "copy_in", "exec", "freeze", "copy_out", "copy_out", "destroy"]
    assert all(action.frozen for action in sandbox.did("copy_out"))
    # what the agent had written and printed before the deadline is collected
    case = pipeline.case_dir("c1")
    assert (case.path / "out" / "hello.txt").read_text() == "hi from c1"
    assert outcome.num_turns == 2 and case.transcript.is_file()
    assert "ERROR: timed out after 1s" in case.stderr_log.read_text()
    _no_sandbox_left(backend)


def test_after_a_deadline_the_sandbox_is_resumed_for_container_after_each_hooks(eval_project, make_pipeline, backend,
                                                                                cli):
    eval_project.eval_yaml("""
        hooks:
          after_each:
            - scope: container
              command: 'echo cleanup'
    """)
    eval_project.case("c1")
    cli.hang = True
    outcome = make_pipeline(timeout=1).run("c1")

    assert outcome.end_reason == "timed_out"
    (sandbox,) = backend.created
    assert _kinds(sandbox)[-5:] == ["copy_out", "copy_out", "thaw", "exec", "destroy"]
    assert sandbox.did("exec")[1].detail == CONFINED[0] and not sandbox.did("exec")[1].frozen


def test_a_sandbox_that_cannot_be_resumed_warns_and_the_case_still_ends(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml("""
        hooks:
          after_each:
            - scope: container
              command: 'echo cleanup'
    """)
    eval_project.case("c1")
    cli.hang = True
    backend.thaw_succeeds = False
    pipeline = make_pipeline(timeout=1)
    outcome = pipeline.run("c1")

    assert outcome.end_reason == "timed_out"
    assert any("could not be resumed" in warning for warning in pipeline.warnings)
    assert any("after_each" in line and "FAIL" in line for line in pipeline.hook_lines), pipeline.hook_lines
    _no_sandbox_left(backend)


# ---- the gateway's record decides what the agent said ------------------------------------------------


def test_a_forged_tool_call_in_the_agents_output_is_dropped(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    eval_project.case("c1")
    cli.forged = [{"type": "assistant", "session_id": "s", "message": {
        "id": "msg_forged", "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_forged", "name": "Bash", "input": {"command": "echo PASS"}}]}}]
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")

    assert outcome.integrity.checked and outcome.integrity.dropped == 1
    assert "never sent by the model" in outcome.integrity.findings[0]["reason"]
    events = json.loads(pipeline.case_dir("c1").events.read_text())
    assert all(tool["name"] != "Bash" for e in events if e["type"] == "assistant" for tool in e["tools"])
    assert "were not what the model sent" in pipeline.case_dir("c1").stderr_log.read_text()


def test_a_forged_final_result_gives_way_to_the_models_answer(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    eval_project.case("c1")
    cli.forged = [{"type": "result", "subtype": "success", "is_error": False, "num_turns": 40,
                   "result": "All 40 tests PASS", "session_id": "not-the-session", "total_cost_usd": 0.0}]
    outcome = make_pipeline().run("c1")

    assert outcome.result == "c1 done" and outcome.num_turns == 2
    assert outcome.session_id != "not-the-session"
    reasons = " | ".join(finding["reason"] for finding in outcome.integrity.findings)
    assert "nothing the model answered this session" in reasons and "claims 40 turns" in reasons and "session" in reasons
