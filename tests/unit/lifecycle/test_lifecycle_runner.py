"""HookRunner with real host processes: order, statuses, logs, console lines, env, conditions,
failure rules, outputs, and the finally structure the run orchestration relies on."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.config.models import HookEntry, HooksConfig
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.lifecycle import (
    CaseInfo,
    HookFailed,
    HookResult,
    HookRunner,
    HookStatus,
    NoSandboxError,
    Phase,
    RunInfo,
    log_name,
)
from agent_eval_sandbox.lifecycle.outputs import HookOutputs

CONDITION_LIMIT_S = 1.0


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def hook(command: str, **fields) -> HookEntry:
    return HookEntry(command=command, **fields)


@pytest.fixture
def ctx(tmp_path: Path) -> RunInfo:
    project = tmp_path / "project"
    workspaces = tmp_path / "workspaces"
    project.mkdir()
    workspaces.mkdir()
    (project / "eval.yaml").write_text("name: t\n")
    return RunInfo(
        run_id="20250101-000000-abcdef",
        run_dir=tmp_path / "run",
        project_root=project,
        config_path=project / "eval.yaml",
        workspace_root=workspaces,
        model="claude-test-model",
        caller_env={**os.environ, "CALLER_VAR": "from-caller", "CASE_ID": "stale-from-parent"},
    )


@pytest.fixture
def case(ctx: RunInfo) -> CaseInfo:
    workspace = ctx.workspace_root / "case-001"
    workspace.mkdir()
    (workspace / "input.yaml").write_text("prompt: hi\n")
    source = ctx.project_root / "cases" / "case-001"
    source.mkdir(parents=True)
    return CaseInfo(id="case-001", workspace=workspace, source_dir=source, input_path=workspace / "input.yaml")


@pytest.fixture
def reported() -> list[HookResult]:
    return []


@pytest.fixture
def runner(ctx: RunInfo, reported: list[HookResult]) -> HookRunner:
    return HookRunner(ctx, report=reported.append, kill_grace_s=0.5, condition_timeout_s=CONDITION_LIMIT_S)


# ---- phases, order, statuses, console lines, logs -------------------------------------


def test_phase_rules():
    assert [p for p in Phase if p.aborting] == [Phase.BEFORE_ALL, Phase.BEFORE_EACH, Phase.BEFORE_STEP,
                                                Phase.BEFORE_SCORING]
    assert [p for p in Phase if p.per_case] == [Phase.BEFORE_EACH, Phase.BEFORE_STEP, Phase.AFTER_STEP,
                                                Phase.AFTER_EACH]
    assert [p for p in Phase if p.collects_outputs] == [Phase.BEFORE_ALL, Phase.BEFORE_EACH]


def test_hooks_run_in_order_with_one_console_line_each(runner, reported, ctx):
    hooks = [
        hook("echo first >> order.txt", description="first"),
        hook("echo second >> order.txt; exit 3"),
        hook("echo third >> order.txt; sleep 300", timeout=1, description="never ends"),
        hook("echo fourth >> order.txt", condition="false", description="guarded"),
        hook("echo fifth >> order.txt"),
    ]
    result = runner.run_safe(Phase.AFTER_ALL, hooks)
    assert (ctx.project_root / "order.txt").read_text() == "first\nsecond\nthird\nfifth\n"
    assert [r.status for r in result.results] == [
        HookStatus.OK, HookStatus.FAIL, HookStatus.TIMEOUT, HookStatus.SKIP, HookStatus.OK
    ]
    assert [r.console_line for r in reported] == [
        "hook after_all.0: first ... OK",
        "hook after_all.1: echo second >> order.txt; exit 3 ... FAIL (exit 3)",
        "hook after_all.2: never ends ... TIMEOUT (1s)",
        "hook after_all.3: guarded ... SKIP (condition)",
        "hook after_all.4: echo fifth >> order.txt ... OK",
    ]
    assert reported == list(result.results)
    assert [r.exit_code for r in result.results] == [0, 3, None, None, 0]
    assert result.failures == (result.results[1], result.results[2])
    assert 1.0 <= result.results[2].duration_s < 5


def test_log_files_are_named_by_phase_case_and_index(runner, ctx, case):
    runner.run(Phase.BEFORE_ALL, [hook("echo a"), hook("echo b")])
    runner.run(Phase.BEFORE_EACH, [hook("echo c")], case=case)
    odd = CaseInfo(id="../we ird", workspace=case.workspace, source_dir=case.source_dir, input_path=case.input_path)
    runner.run_safe(Phase.AFTER_EACH, [hook("echo d")], case=odd)
    assert sorted(p.name for p in ctx.log_dir.iterdir()) == [
        "after_each..._we_ird.0.log",
        "before_all.0.log",
        "before_all.1.log",
        "before_each.case-001.0.log",
    ]
    assert log_name(Phase.BEFORE_EACH, "case-001", 2) == "before_each.case-001.2.log"


def test_log_holds_stdout_stderr_condition_output_and_our_notes(runner, ctx):
    result = runner.run_safe(
        Phase.AFTER_ALL,
        [
            hook("echo out; echo err >&2; exit 4", condition="echo checking; true"),
            hook("echo never", condition="echo 'no db' >&2; exit 1"),
            hook("echo slow; sleep 300", timeout=1),
        ],
    )
    logs = [r.log_path.read_text() for r in result.results]
    assert logs[0] == "checking\nout\nerr\n\n[agent-eval-sandbox] hook exited 4\n"
    assert logs[1] == "no db\n\n[agent-eval-sandbox] condition exited 1: hook skipped\n"
    assert logs[2] == "slow\n\n[agent-eval-sandbox] hook timed out after 1s and was killed\n"
    assert all(r.log_path.parent == ctx.run_dir / "hooks" for r in result.results)


def test_label_is_description_or_first_line_of_command(runner, reported):
    runner.run_safe(Phase.AFTER_ALL, [hook("true\ntrue"), hook("x" * 100 + " || true")])
    assert reported[0].console_line == "hook after_all.0: true ... OK"
    assert reported[1].console_line == f"hook after_all.1: {'x' * 60} ... OK"


# ---- environment and working directory ------------------------------------------------


def env_of(log: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in log.read_text().splitlines() if "=" in line)


def test_run_wide_hooks_get_run_vars_in_the_project_root(runner, ctx):
    result = runner.run(Phase.BEFORE_ALL, [hook("echo PWD=$(pwd); env")])
    env = env_of(result.results[0].log_path)
    assert env["PWD"] == str(ctx.project_root)
    assert env["AGENT_EVAL_WORKSPACE"] == str(ctx.workspace_root)
    assert env["AGENT_EVAL_RUN_ID"] == "20250101-000000-abcdef"
    assert env["AGENT_EVAL_CONFIG"] == str(ctx.project_root / "eval.yaml")
    assert env["AGENT_EVAL_PROJECT_ROOT"] == str(ctx.project_root)
    assert env["AGENT_EVAL_MODEL"] == "claude-test-model"
    assert env["CALLER_VAR"] == "from-caller"
    assert not {"CASE_ID", "CASE_WORKSPACE", "CASE_SOURCE_DIR", "CASE_INPUT"} & env.keys()


def test_per_case_host_hooks_get_case_vars_in_the_case_workspace(runner, ctx, case):
    result = runner.run(Phase.BEFORE_EACH, [hook("echo PWD=$(pwd); env")], case=case)
    env = env_of(result.results[0].log_path)
    assert env["PWD"] == str(case.workspace)
    assert env["CASE_ID"] == "case-001"
    assert env["CASE_WORKSPACE"] == str(case.workspace)
    assert env["CASE_SOURCE_DIR"] == str(case.source_dir)
    assert env["CASE_INPUT"] == str(case.workspace / "input.yaml")
    assert env["AGENT_EVAL_RUN_ID"] == ctx.run_id
    assert env["CALLER_VAR"] == "from-caller"


def test_after_each_host_hooks_run_in_the_project_root_with_the_workspace_as_data(runner, ctx, case):
    """After the agent, the workspace is its output: a hook must not run in it."""
    (case.workspace / "json").mkdir()
    (case.workspace / "json" / "__init__.py").write_text("open('AGENT-CODE-RAN', 'w')\n")
    (case.workspace / "artifacts").mkdir()
    (case.workspace / "artifacts" / "result.json").write_text('{"ok": true}\n')
    with_run_dir = CaseInfo(id=case.id, workspace=case.workspace, source_dir=case.source_dir,
                            input_path=case.input_path, run_dir=ctx.run_dir / "cases" / case.id)
    result = runner.run_safe(Phase.AFTER_EACH, [
        hook("echo PWD=$(pwd); env"),
        hook('python3 -m json.tool "$CASE_WORKSPACE/artifacts/result.json"'),
    ], case=with_run_dir)
    env = env_of(result.results[0].log_path)
    assert env["PWD"] == str(ctx.project_root)
    assert env["CASE_WORKSPACE"] == str(case.workspace)
    assert env["CASE_RUN_DIR"] == str(ctx.run_dir / "cases" / case.id)
    assert result.results[1].status is HookStatus.OK
    assert '"ok": true' in result.results[1].log_path.read_text()
    assert not list(ctx.project_root.rglob("AGENT-CODE-RAN")) and not list(case.workspace.rglob("AGENT-CODE-RAN"))


def test_host_hooks_get_no_search_path_into_agent_output(tmp_path, ctx, case):
    """Empty, relative and agent-output entries leave PATH and PYTHONPATH; loaders pointing there go."""
    collected = ctx.workspace_root / "0001" / "after"
    caller = {
        **os.environ,
        "PATH": f"::bin:{collected}/bin:{ctx.run_dir}/cases/c/bin:{os.environ['PATH']}",
        "PYTHONPATH": f"lib:{collected}:/opt/own-lib",
        "BASH_ENV": f"{collected}/env.sh",
        "PYTHONSTARTUP": "/home/me/.pythonrc",
    }
    runner = HookRunner(RunInfo(**{**ctx.__dict__, "caller_env": caller}), report=lambda _r: None)
    for phase in (Phase.BEFORE_ALL, Phase.AFTER_ALL):
        env = env_of(runner.run_safe(phase, [hook("env")]).results[0].log_path)
        assert env["PATH"] == os.environ["PATH"]
        assert env["PYTHONPATH"] == "/opt/own-lib"
        assert "BASH_ENV" not in env
        assert env["PYTHONSTARTUP"] == "/home/me/.pythonrc"  # the caller's own, left alone
    for phase in (Phase.BEFORE_EACH, Phase.AFTER_EACH):
        env = env_of(runner.run_safe(phase, [hook("env")], case=case).results[0].log_path)
        assert env["PATH"] == os.environ["PATH"] and env["PYTHONPATH"] == "/opt/own-lib"


def test_host_git_refuses_a_directory_that_only_looks_like_a_repository(runner, case, tmp_path):
    """Collected workspaces hold no .git; a bare-repository shape is the other way in."""
    bare = case.workspace / "bare"
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    git_env = {"PATH": os.environ["PATH"], "HOME": str(fake_home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, env=git_env)
    for key, value in (("core.bare", "false"), ("core.worktree", "."),
                       ("core.fsmonitor", f"touch {tmp_path}/FSMONITOR-RAN; false")):
        subprocess.run(["git", "-C", str(bare), "config", key, value], check=True, env=git_env)
    # the control: plain git does run the planted command
    subprocess.run(["git", "-C", str(bare), "status"], env=git_env, capture_output=True)
    assert (tmp_path / "FSMONITOR-RAN").exists()
    (tmp_path / "FSMONITOR-RAN").unlink()
    result = runner.run_safe(Phase.AFTER_EACH, [hook('git -C "$CASE_WORKSPACE/bare" status')], case=case)
    assert "cannot use bare repository" in result.results[0].log_path.read_text()
    assert not (tmp_path / "FSMONITOR-RAN").exists()


def test_condition_sees_the_same_environment(runner, case):
    result = runner.run(
        Phase.BEFORE_EACH,
        [
            hook("echo ran", condition='test "$CASE_ID" = case-001 && test -f "$CASE_INPUT"'),
            hook("echo ran", condition='test -f "$CASE_SOURCE_DIR/needs_db"'),
        ],
        case=case,
    )
    assert [r.status for r in result.results] == [HookStatus.OK, HookStatus.SKIP]


# ---- conditions -------------------------------------------------------------------------


def test_skipped_hook_does_not_run(runner, ctx):
    result = runner.run(Phase.BEFORE_ALL, [hook("touch ran", condition="exit 2")])
    assert result.results[0].status is HookStatus.SKIP
    assert not (ctx.project_root / "ran").exists()


def test_hanging_condition_is_cut_at_its_limit_and_skips(runner, ctx):
    started = time.monotonic()
    result = runner.run(
        Phase.BEFORE_ALL, [hook("touch ran", condition="echo $$ > cond.pid; sleep 300", timeout=100)]
    )
    assert result.results[0].status is HookStatus.SKIP
    assert time.monotonic() - started < CONDITION_LIMIT_S + 3
    assert not (ctx.project_root / "ran").exists()
    assert not alive(int((ctx.project_root / "cond.pid").read_text()))
    assert "condition timed out after 1s and was killed: hook skipped" in result.results[0].log_path.read_text()


def test_condition_limit_defaults_to_30s(ctx):
    assert HookRunner(ctx).condition_timeout_s == 30.0


# ---- failure rules ------------------------------------------------------------------------


@pytest.mark.parametrize("phase", [Phase.BEFORE_ALL, Phase.BEFORE_SCORING])
def test_aborting_phase_stops_at_a_failing_hook(runner, ctx, phase):
    with pytest.raises(HookFailed) as info:
        runner.run(phase, [hook("touch one"), hook("exit 5", description="seed db"), hook("touch three")])
    error = info.value
    assert isinstance(error, UserError) and error.exit_code == 2
    assert error.hook.description == "seed db"
    assert error.result.status is HookStatus.FAIL and error.result.exit_code == 5
    assert [r.index for r in error.phase_result.results] == [0, 1]
    assert str(error) == (
        f"{phase} hook #1 failed: seed db — FAIL (exit 5) — see {ctx.log_dir / f'{phase}.1.log'}"
    )
    assert (ctx.project_root / "one").exists() and not (ctx.project_root / "three").exists()


def test_before_each_failure_names_the_case(runner, case):
    with pytest.raises(HookFailed, match=r"^before_each hook #0 for case case-001 failed: .* — FAIL \(exit 1\)"):
        runner.run(Phase.BEFORE_EACH, [hook("false")], case=case)


def test_timeout_counts_as_failure(runner):
    with pytest.raises(HookFailed, match=r"TIMEOUT \(1s\)") as info:
        runner.run(Phase.BEFORE_ALL, [hook("sleep 300", timeout=1)])
    assert info.value.result.status is HookStatus.TIMEOUT


def test_on_failure_continue_goes_on(runner, ctx):
    result = runner.run(
        Phase.BEFORE_ALL,
        [hook("exit 1", on_failure="continue"), hook("sleep 300", timeout=1, on_failure="continue"), hook("touch three")],
    )
    assert [r.status for r in result.results] == [HookStatus.FAIL, HookStatus.TIMEOUT, HookStatus.OK]
    assert (ctx.project_root / "three").exists()


@pytest.mark.parametrize("phase", [Phase.AFTER_ALL, Phase.BEFORE_REPORT])
def test_guaranteed_phases_ignore_on_failure_fail(runner, ctx, phase):
    result = runner.run(phase, [hook("exit 1", on_failure="fail"), hook("touch two")])
    assert [r.status for r in result.results] == [HookStatus.FAIL, HookStatus.OK]
    assert (ctx.project_root / "two").exists()


def test_after_each_ignores_on_failure_fail(runner, case):
    result = runner.run(Phase.AFTER_EACH, [hook("exit 1"), hook("touch two")], case=case)
    assert [r.status for r in result.results] == [HookStatus.FAIL, HookStatus.OK]


def test_safe_runner_turns_an_unwritable_log_dir_into_failed_hooks(ctx, reported):
    ctx.run_dir.mkdir()
    (ctx.run_dir / "hooks").write_text("a file where the log directory should be")
    runner = HookRunner(ctx, report=reported.append)
    result = runner.run_safe(Phase.AFTER_ALL, [hook("true"), hook("true")])
    assert [r.status for r in result.results] == [HookStatus.FAIL, HookStatus.FAIL]
    assert reported[0].console_line.startswith("hook after_all.0: true ... FAIL (FileExistsError:")
    assert isinstance(result.results[0].exception, OSError)


def test_safe_runner_survives_a_broken_console(ctx):
    def broken(result: HookResult) -> None:
        raise BrokenPipeError("console went away")

    result = HookRunner(ctx, report=broken).run_safe(Phase.AFTER_ALL, [hook("true"), hook("true")])
    assert len(result.results) == 2


def test_container_hook_without_a_sandbox_fails_cleanly(runner, case):
    with pytest.raises(HookFailed, match=r"FAIL \(NoSandboxError: no sandbox") as info:
        runner.run(Phase.BEFORE_EACH, [hook("true", scope="container")], case=case)
    assert isinstance(info.value.__cause__, NoSandboxError)


def test_sandbox_is_requested_only_by_container_hooks_and_its_errors_are_hook_failures(runner, case):
    calls = []

    def make_sandbox():
        calls.append(1)
        raise RuntimeError("docker is not running")

    result = runner.run(Phase.BEFORE_EACH, [hook("true"), hook("true")], case=case, sandbox=make_sandbox)
    assert calls == [] and len(result.results) == 2
    with pytest.raises(HookFailed, match=r"FAIL \(RuntimeError: docker is not running\)") as info:
        runner.run(Phase.BEFORE_EACH, [hook("true"), hook("true", scope="container")], case=case, sandbox=make_sandbox)
    assert calls == [1]
    assert isinstance(info.value.__cause__, RuntimeError)


def test_case_is_required_exactly_for_per_case_phases(runner, case):
    with pytest.raises(ValueError, match="before_each hooks need the case"):
        runner.run(Phase.BEFORE_EACH, [])
    with pytest.raises(ValueError, match="after_each hooks need the case"):
        runner.run_safe(Phase.AFTER_EACH, [])
    with pytest.raises(ValueError, match="before_all hooks run once per run"):
        runner.run(Phase.BEFORE_ALL, [], case=case)


def test_phase_accepts_its_name(runner):
    assert runner.run("before_scoring", [hook("true")]).phase is Phase.BEFORE_SCORING


# ---- hook outputs ---------------------------------------------------------------------------


def write_outputs(where: str, text: str, name: str = ".hook-outputs.yaml") -> str:
    return f"cat > {where}/{name} <<'EOF'\n{text}EOF"


def test_before_all_outputs_from_workspace_root_and_cwd(runner, ctx):
    result = runner.run(
        Phase.BEFORE_ALL,
        [
            hook(write_outputs("$AGENT_EVAL_WORKSPACE", "env: {A: ws}\ndata: {from: workspace}\n")),
            hook(write_outputs(".", '{"env": {"B": "cwd"}}\n', name=".hook-outputs.json")),
            hook(write_outputs(".", "data: {late: 1}\n")),
        ],
    )
    assert result.outputs == HookOutputs(env={"A": "ws", "B": "cwd"}, data={"from": "workspace", "late": 1})
    assert result.results[0].outputs.env == {"A": "ws"}
    assert not list(ctx.workspace_root.glob(".hook-outputs.*"))
    assert not list(ctx.project_root.glob(".hook-outputs.*"))


def test_before_each_outputs_from_case_workspace_later_hook_wins(runner, case):
    result = runner.run(
        Phase.BEFORE_EACH,
        [
            hook(write_outputs("$CASE_WORKSPACE", "env: {TOKEN: one, KEEP: k}\n")),
            hook(write_outputs(".", "env: {TOKEN: two}\ndata: {rows: 42}\n")),
        ],
        case=case,
    )
    assert result.outputs == HookOutputs(env={"TOKEN": "two", "KEEP": "k"}, data={"rows": 42})
    assert not (case.workspace / ".hook-outputs.yaml").exists()


def test_case_outputs_override_global_ones(runner, case):
    global_ = runner.run(Phase.BEFORE_ALL, [hook(write_outputs(".", "env: {A: g, B: g}\ndata: {x: g, y: g}\n"))])
    per_case = runner.run(Phase.BEFORE_EACH, [hook(write_outputs(".", "env: {B: c}\ndata: {y: c}\n"))], case=case)
    merged = global_.outputs.merged(per_case.outputs)
    assert merged.env == {"A": "g", "B": "c"}
    assert merged.data == {"x": "g", "y": "c"}


@pytest.mark.parametrize("phase", [Phase.AFTER_EACH])
def test_outputs_of_other_phases_are_not_collected(runner, case, phase):
    result = runner.run(phase, [hook(write_outputs('"$CASE_WORKSPACE"', "env: {A: b}\n"))], case=case)
    assert result.outputs == HookOutputs()
    assert (case.workspace / ".hook-outputs.yaml").exists()


def test_after_all_outputs_are_not_collected(runner, ctx):
    result = runner.run(Phase.AFTER_ALL, [hook(write_outputs(".", "env: {A: b}\n"))])
    assert result.outputs == HookOutputs()
    assert (ctx.project_root / ".hook-outputs.yaml").exists()


def test_outputs_of_a_failed_hook_are_discarded_and_deleted(runner, case):
    result = runner.run(
        Phase.BEFORE_EACH,
        [hook(write_outputs(".", "env: {A: b}\n") + "\nexit 1", on_failure="continue"), hook("true")],
        case=case,
    )
    assert result.outputs == HookOutputs()
    assert not (case.workspace / ".hook-outputs.yaml").exists()
    assert "outputs of the failed hook discarded" in result.results[0].log_path.read_text()


HOSTILE = {
    "huge": "head -c 2000000 /dev/zero | tr '\\0' x > .hook-outputs.yaml",
    "not a mapping": "echo '[1, 2, 3]' > .hook-outputs.yaml",
    "bomb": "python3 -c \"print('\\n'.join(['a: &a [x,x,x,x,x,x,x,x,x]'] + "
    "[f'{n}: &{n} [' + ','.join(['*' + p] * 9) + ']' for p, n in zip('abcdef', 'bcdefg')]))\" > .hook-outputs.yaml",
    "binary": "head -c 64 /dev/urandom > .hook-outputs.yaml; printf '\\xff' >> .hook-outputs.yaml",
    "non-string env": "printf 'env:\\n  PORT: 8099\\n' > .hook-outputs.yaml",
    "bad env name": "printf 'env:\\n  \"A-B\": x\\n' > .hook-outputs.yaml",
    "symlink": "ln -s $CASE_SOURCE_DIR/answers.yaml .hook-outputs.yaml",
    "fifo": "mkfifo .hook-outputs.yaml",
}
EXPECTED = {
    "huge": "larger than 1048576 bytes",
    "not a mapping": "must be a mapping with `env:` and/or `data:`, got list",
    "bomb": "expands to more than",
    "binary": "not UTF-8 text",
    "non-string env": "env.PORT must be a string, got int 8099",
    "bad env name": "env key 'A-B' is not a valid environment variable name",
    "symlink": "is a symbolic link; refused",
    "fifo": "is not a regular file",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_outputs_fail_the_hook_and_are_deleted(runner, case, kind):
    (case.source_dir / "answers.yaml").write_text("env: {ANSWER: secret}\n")
    with pytest.raises(HookFailed) as info:
        runner.run(Phase.BEFORE_EACH, [hook(HOSTILE[kind])], case=case)
    result = info.value.result
    assert result.status is HookStatus.FAIL and result.exit_code == 0
    assert EXPECTED[kind] in result.reason
    assert result.reason.startswith(f"{case.workspace}/.hook-outputs.yaml: ")
    assert result.console_line.startswith("hook before_each.case-001.0: ") and " ... FAIL (" in result.console_line
    assert "\n" not in result.console_line
    assert EXPECTED[kind] in result.log_path.read_text()
    assert not os.path.lexists(case.workspace / ".hook-outputs.yaml")
    assert "secret" not in str(info.value)


def test_hostile_outputs_with_on_failure_continue(runner, case):
    result = runner.run(
        Phase.BEFORE_EACH,
        [hook("echo '- x' > .hook-outputs.yaml", on_failure="continue"), hook(write_outputs(".", "env: {A: b}\n"))],
        case=case,
    )
    assert [r.status for r in result.results] == [HookStatus.FAIL, HookStatus.OK]
    assert result.outputs.env == {"A": "b"}


def test_unknown_top_level_keys_warn(runner, case):
    result = runner.run(Phase.BEFORE_EACH, [hook(write_outputs(".", "env: {A: b}\nenvironment: {C: d}\n"))], case=case)
    only = result.results[0]
    assert only.status is HookStatus.OK and only.outputs.env == {"A": "b"}
    assert only.warnings == (
        f"{case.workspace}/.hook-outputs.yaml: unknown top-level key(s) environment ignored (only env and data are read)",
    )
    assert "warning: " in only.log_path.read_text()


# ---- the finally structure, as the run orchestration uses it -------------------------------


class AgentCrashed(Exception):
    pass


def run_one_case(runner: HookRunner, config: HooksConfig, case: CaseInfo, agent) -> str:
    """What the runner does per case: before_each, agent, after_each in a finally."""
    with runner.around_case(config, case) as before_each:
        return agent(before_each.outputs.env)


def test_failing_before_each_still_runs_after_each_and_its_error_surfaces(runner, case, reported):
    config = HooksConfig(
        before_each=[hook("exit 9", description="mint token")],
        after_each=[hook('touch "$CASE_WORKSPACE/cleaned"', description="cleanup")],
    )
    agent_calls = []
    with pytest.raises(HookFailed, match="mint token"):
        run_one_case(runner, config, case, agent_calls.append)
    assert agent_calls == []
    assert (case.workspace / "cleaned").exists()
    assert [r.console_line for r in reported] == [
        "hook before_each.case-001.0: mint token ... FAIL (exit 9)",
        "hook after_each.case-001.0: cleanup ... OK",
    ]


def test_agent_error_is_not_masked_by_failing_after_each(runner, case):
    config = HooksConfig(
        before_each=[hook(write_outputs(".", "env: {TOKEN: t}\n"))],
        after_each=[
            hook("exit 1", on_failure="fail"),
            hook("sleep 300", timeout=1),
            hook('touch "$CASE_WORKSPACE/cleaned"'),
        ],
    )
    seen = []

    def agent(env):
        seen.append(dict(env))
        raise AgentCrashed("the agent blew up")

    with pytest.raises(AgentCrashed, match="the agent blew up"):
        run_one_case(runner, config, case, agent)
    assert seen == [{"TOKEN": "t"}]
    assert (case.workspace / "cleaned").exists()


def test_successful_case_runs_after_each_once(runner, case):
    config = HooksConfig(after_each=[hook('echo x >> "$CASE_WORKSPACE/cleaned"')])
    assert run_one_case(runner, config, case, lambda env: "done") == "done"
    assert (case.workspace / "cleaned").read_text() == "x\n"


def test_around_run_runs_after_all_even_when_before_all_fails(runner, ctx):
    config = HooksConfig(before_all=[hook("exit 1")], after_all=[hook("touch torn-down")])
    body = []
    with pytest.raises(HookFailed):
        with runner.around_run(config):
            body.append(1)
    assert body == []
    assert (ctx.project_root / "torn-down").exists()


def test_full_run_order(runner, ctx, case):
    config = HooksConfig(
        before_all=[hook("echo before_all >> $AGENT_EVAL_PROJECT_ROOT/trace")],
        before_each=[hook("echo before_each $CASE_ID >> $AGENT_EVAL_PROJECT_ROOT/trace")],
        after_each=[hook("echo after_each $CASE_ID >> $AGENT_EVAL_PROJECT_ROOT/trace")],
        before_scoring=[hook("echo before_scoring >> trace")],
        after_all=[hook("echo after_all >> trace")],
    )
    with runner.around_run(config):
        run_one_case(runner, config, case, lambda env: None)
        runner.run(Phase.BEFORE_SCORING, config.before_scoring)
    assert (ctx.project_root / "trace").read_text().splitlines() == [
        "before_all",
        "before_each case-001",
        "after_each case-001",
        "before_scoring",
        "after_all",
    ]


def test_hook_outputs_of_the_run_and_of_a_case_merge_the_case_winning(runner, ctx, case):
    config = HooksConfig(
        before_all=[hook(write_outputs("$AGENT_EVAL_WORKSPACE", "data: {server: up, count: 1}\n"))],
        before_each=[hook(write_outputs(".", "data: {count: 2}\n"))],
    )
    with runner.around_run(config) as before_all:
        with runner.around_case(config, case) as before_each:
            pass
    assert before_all.outputs.data == {"server": "up", "count": 1}
    assert before_all.outputs.merged(before_each.outputs).data == {"server": "up", "count": 2}
