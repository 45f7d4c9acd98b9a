"""Container-scope lifecycle hooks in real sandboxes of the Docker backend."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.config.models import HookEntry, HooksConfig
from agent_eval_sandbox.lifecycle import (
    CaseInfo,
    HookFailed,
    HookResult,
    HookRunner,
    HookStatus,
    Phase,
    RunInfo,
)
from agent_eval_sandbox.lifecycle.outputs import HookOutputs
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.base import Limits, Sandbox, SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend

pytestmark = pytest.mark.docker

CONDITION_LIMIT_S = 1.5


def container_hook(command: str, **fields) -> HookEntry:
    return HookEntry(command=command, scope="container", **fields)


@pytest.fixture(scope="module")
def backend() -> DockerBackend:
    return DockerBackend()


@pytest.fixture
def run_id(backend: DockerBackend) -> Iterator[str]:
    rid = f"test-hooks-{uuid.uuid4().hex[:10]}"
    yield rid
    backend.destroy_run(rid)
    api = backend.client.api
    assert api.containers(all=True, filters={"label": f"{L.RUN_ID}={rid}"}) == []


@pytest.fixture
def make_sandbox(backend: DockerBackend, sandbox_image: str, run_id: str) -> Iterator[Callable[..., Sandbox]]:
    made: list[Sandbox] = []

    def make(case_id: str = "case-001", limits: Limits = Limits()) -> Sandbox:
        spec = SandboxSpec(
            image=sandbox_image, run_id=run_id, case_id=case_id, deadline_epoch=time.time() + 600, limits=limits
        )
        made.append(backend.create(spec))
        return made[-1]

    yield make
    for sandbox in made:
        sandbox.destroy()


@pytest.fixture
def sandbox(make_sandbox) -> Sandbox:
    box = make_sandbox()
    box.copy_in_files({"input.yaml": b"prompt: hi\n"}, "/workspace")
    return box


@pytest.fixture
def ctx(tmp_path: Path, run_id: str) -> RunInfo:
    project = tmp_path / "project"
    project.mkdir()
    return RunInfo(
        run_id=run_id,
        run_dir=tmp_path / "run",
        project_root=project,
        config_path=project / "eval.yaml",
        workspace_root=tmp_path / "workspaces",
        model="claude-test-model",
        caller_env={**os.environ, "ANTHROPIC_API_KEY": "sk-caller-secret", "CALLER_VAR": "from-caller"},
    )


@pytest.fixture
def case(ctx: RunInfo) -> CaseInfo:
    workspace = ctx.workspace_root / "case-001"
    workspace.mkdir(parents=True)
    (workspace / "input.yaml").write_text("prompt: hi\n")
    source = ctx.project_root / "cases" / "case-001"
    source.mkdir(parents=True)
    (source / "answers.yaml").write_text("expected: the answer key\n")
    return CaseInfo(id="case-001", workspace=workspace, source_dir=source, input_path=workspace / "input.yaml")


@pytest.fixture
def reported() -> list[HookResult]:
    return []


@pytest.fixture
def runner(ctx: RunInfo, reported: list[HookResult]) -> HookRunner:
    return HookRunner(ctx, report=reported.append, kill_grace_s=0.5, condition_timeout_s=CONDITION_LIMIT_S)


def exists_in(sandbox: Sandbox, path: str) -> bool:
    return sandbox.exec(["sh", "-c", f'test -e "{path}" || test -L "{path}"']).ok


def processes(sandbox: Sandbox) -> str:
    return sandbox.exec(["ps", "-eo", "args="]).stdout.decode()


# ---- where and how it runs ------------------------------------------------------------------


def test_runs_as_the_sandbox_user_in_the_workspace_with_container_paths(runner, case, sandbox, run_id):
    result = runner.run(
        Phase.BEFORE_EACH,
        [container_hook('echo "UID=$(id -u)"; echo "PWD=$(pwd)"; env; echo to-stderr >&2')],
        case=case,
        sandbox=sandbox,
    )
    log = result.results[0].log_path
    assert log.name == "before_each.case-001.0.log"
    text = log.read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert env["UID"] == "1000" and env["PWD"] == "/workspace"
    assert env["AGENT_EVAL_WORKSPACE"] == "/workspace"
    assert env["AGENT_EVAL_RUN_ID"] == run_id
    assert env["AGENT_EVAL_MODEL"] == "claude-test-model"
    assert env["AGENT_EVAL_CONFIG"] == "" and env["AGENT_EVAL_PROJECT_ROOT"] == ""
    assert env["CASE_ID"] == "case-001"
    assert env["CASE_WORKSPACE"] == "/workspace"
    assert env["CASE_INPUT"] == "/workspace/input.yaml"
    assert env["CASE_SOURCE_DIR"] == ""
    assert "to-stderr" in text
    # Nothing of the caller's environment (its credentials) reaches the sandbox.
    assert "sk-caller-secret" not in text and "CALLER_VAR" not in env


def test_case_input_is_there_and_the_answer_key_is_not(runner, case, sandbox):
    result = runner.run(
        Phase.BEFORE_EACH,
        [container_hook('cat "$CASE_INPUT"; find / -name answers.yaml 2>/dev/null; echo done')],
        case=case,
        sandbox=sandbox,
    )
    assert result.results[0].log_path.read_text() == "prompt: hi\ndone\n"


def test_runs_under_the_sandbox_limits(runner, case, make_sandbox):
    box = make_sandbox(limits=Limits(pids=77))
    result = runner.run(
        Phase.BEFORE_EACH,
        [container_hook("cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; "
                        "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), 2)' "
                        "2>/dev/null && echo online || echo offline")],
        case=case,
        sandbox=box,
    )
    assert result.results[0].log_path.read_text() == "77\noffline\n"


# ---- statuses and failure rules ----------------------------------------------------------------


def test_exit_code_fail_and_console_lines(runner, case, sandbox, reported):
    with pytest.raises(HookFailed, match=r"FAIL \(exit 3\)"):
        runner.run(
            Phase.BEFORE_EACH,
            [container_hook("true", description="first"), container_hook("exit 3", description="second")],
            case=case,
            sandbox=sandbox,
        )
    assert [r.console_line for r in reported] == [
        "hook before_each.case-001.0: first ... OK",
        "hook before_each.case-001.1: second ... FAIL (exit 3)",
    ]


def test_never_ending_hook_and_its_children_are_killed_and_the_sandbox_lives_on(runner, case, sandbox):
    started = time.monotonic()
    result = runner.run(
        Phase.BEFORE_EACH,
        [container_hook("sleep 3001 & (sleep 3002 &) ; sleep 3003", timeout=1, on_failure="continue")],
        case=case,
        sandbox=sandbox,
    )
    only = result.results[0]
    assert only.status is HookStatus.TIMEOUT and only.console_line.endswith("TIMEOUT (1s)")
    assert time.monotonic() - started < 1 + 10
    assert "sleep 300" not in processes(sandbox)
    assert sandbox.exec(["true"]).ok  # not frozen: the agent can still run
    assert "hook timed out after 1s and was killed" in only.log_path.read_text()


def test_condition_runs_in_the_container(runner, case, sandbox):
    result = runner.run(
        Phase.BEFORE_EACH,
        [
            container_hook("touch ran-1", condition='test -f "$CASE_INPUT" && test "$(id -u)" = 1000'),
            container_hook("touch ran-2", condition="test -f /etc/agent-eval-answer-key"),
        ],
        case=case,
        sandbox=sandbox,
    )
    assert [r.status for r in result.results] == [HookStatus.OK, HookStatus.SKIP]
    assert exists_in(sandbox, "/workspace/ran-1") and not exists_in(sandbox, "/workspace/ran-2")


def test_hanging_condition_in_the_container_skips_at_its_limit(runner, case, sandbox):
    started = time.monotonic()
    result = runner.run(
        Phase.BEFORE_EACH, [container_hook("touch ran", condition="sleep 3004")], case=case, sandbox=sandbox
    )
    assert result.results[0].status is HookStatus.SKIP
    assert time.monotonic() - started < CONDITION_LIMIT_S + 10
    assert "sleep 3004" not in processes(sandbox)
    assert not exists_in(sandbox, "/workspace/ran")


# ---- outputs ------------------------------------------------------------------------------------


def test_outputs_are_read_and_deleted_inside_the_container(runner, case, sandbox):
    result = runner.run(
        Phase.BEFORE_EACH,
        [
            container_hook("printf 'env:\\n  TOKEN: \"t-1\"\\ndata:\\n  rows: 3\\n' > .hook-outputs.yaml"),
            container_hook("""echo '{"env": {"PORT": "8099"}, "data": {"rows": 4}}' > "$CASE_WORKSPACE/.hook-outputs.json" """),
        ],
        case=case,
        sandbox=sandbox,
    )
    assert result.outputs == HookOutputs(env={"TOKEN": "t-1", "PORT": "8099"}, data={"rows": 4})
    assert not exists_in(sandbox, "/workspace/.hook-outputs.yaml")
    assert not exists_in(sandbox, "/workspace/.hook-outputs.json")


def test_after_each_outputs_are_left_alone(runner, case, sandbox):
    result = runner.run(
        Phase.AFTER_EACH, [container_hook("echo 'env: {A: b}' > .hook-outputs.yaml")], case=case, sandbox=sandbox
    )
    assert result.outputs == HookOutputs()
    assert exists_in(sandbox, "/workspace/.hook-outputs.yaml")


HOSTILE = {
    "symlink": ("ln -s /etc/passwd .hook-outputs.yaml", "is a symbolic link; refused (links are never followed)"),
    "dangling symlink": ("ln -s /nowhere .hook-outputs.json", "is a symbolic link; refused"),
    "huge": ("head -c 2000000 /dev/zero | tr '\\0' x > .hook-outputs.yaml", "larger than 1048576 bytes; refused"),
    "not a mapping": ("echo '[1, 2]' > .hook-outputs.yaml", "must be a mapping with `env:` and/or `data:`"),
    "bomb": (
        "python3 -c \"print('\\n'.join(['a: &a [x,x,x,x,x,x,x,x,x]'] + "
        "[f'{n}: &{n} [' + ','.join(['*' + p] * 9) + ']' for p, n in zip('abcdef', 'bcdefg')]))\" > .hook-outputs.yaml",
        "expands to more than",
    ),
    "binary": ("printf '\\xff\\xfe\\x00' > .hook-outputs.yaml", "not UTF-8 text"),
    "non-string env": ("printf 'env:\\n  PORT: 8099\\n' > .hook-outputs.yaml", "env.PORT must be a string, got int"),
    "directory": ("mkdir -p .hook-outputs.yaml/a; touch .hook-outputs.yaml/a/b", "is a directory, not a regular file"),
    "fifo": ("mkfifo .hook-outputs.yaml", "is a fifo, not a regular file; refused"),
    "both": ("echo 'env: {}' > .hook-outputs.yaml; echo '{}' > .hook-outputs.json", "both .hook-outputs.yaml and"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_outputs_from_the_container_are_refused_and_deleted(runner, case, sandbox, kind):
    command, expected = HOSTILE[kind]
    with pytest.raises(HookFailed) as info:
        runner.run(Phase.BEFORE_EACH, [container_hook(command)], case=case, sandbox=sandbox)
    result = info.value.result
    assert result.status is HookStatus.FAIL and result.exit_code == 0
    assert expected in result.reason, result.reason
    assert result.reason.startswith("/workspace"), result.reason
    assert "(in the sandbox)" in result.reason
    assert "root:x:0:0" not in result.reason
    assert not exists_in(sandbox, "/workspace/.hook-outputs.yaml")
    assert not exists_in(sandbox, "/workspace/.hook-outputs.json")


# ---- the runner's pattern: host and container hooks, finally --------------------------------------


def test_host_hooks_prepare_the_workspace_before_the_lazily_created_sandbox(runner, case, make_sandbox):
    created: list[Sandbox] = []

    def get_sandbox() -> Sandbox:
        if not created:
            box = make_sandbox()
            box.copy_in(case.workspace, "/workspace")
            created.append(box)
        return created[0]

    result = runner.run(
        Phase.BEFORE_EACH,
        [
            HookEntry(command="echo fixture > fixture.txt"),
            container_hook("cat fixture.txt > seen.txt"),
            container_hook("cat seen.txt"),
        ],
        case=case,
        sandbox=get_sandbox,
    )
    assert len(created) == 1
    assert [r.status for r in result.results] == [HookStatus.OK] * 3
    assert result.results[2].log_path.read_text() == "fixture\n"


def test_failing_container_before_each_still_runs_after_each(runner, case, sandbox, reported):
    config = HooksConfig(
        before_each=[container_hook("exit 4", description="prepare")],
        after_each=[
            container_hook("touch /workspace/cleaned-in-sandbox", description="clean sandbox"),
            HookEntry(command='touch "$CASE_WORKSPACE/cleaned-on-host"', description="clean host"),
        ],
    )
    agent_calls = []
    with pytest.raises(HookFailed, match="prepare"):
        with runner.around_case(config, case, sandbox=sandbox):
            agent_calls.append(1)
    assert agent_calls == []
    assert exists_in(sandbox, "/workspace/cleaned-in-sandbox")
    assert (case.workspace / "cleaned-on-host").exists()
    assert [r.status_text for r in reported] == ["FAIL (exit 4)", "OK", "OK"]


def test_after_each_in_a_gone_sandbox_fails_without_raising(runner, case, sandbox):
    sandbox.destroy()
    result = runner.run_safe(
        Phase.AFTER_EACH, [container_hook("true"), HookEntry(command='touch "$CASE_WORKSPACE/host-ran"')], case=case,
        sandbox=sandbox,
    )
    first, second = result.results
    assert first.status is HookStatus.FAIL and first.reason.startswith("SandboxError: ")
    assert isinstance(first.exception, SandboxError)
    assert second.status is HookStatus.OK and (case.workspace / "host-ran").exists()
