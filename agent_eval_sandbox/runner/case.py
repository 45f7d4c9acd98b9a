"""One invocation as a pipeline: prepare → before_each → sandbox + agent → copy out → after_each → collect.

    outcome = run_case(ctx, invocation, status, slot)

Each stage is a function of typed values. What a stage starts — the model
upstream, the gateway channel, the hook broker, the sandbox — it registers on
the case's `CaseParts`, which releases all of it whatever happened; after_each
runs before that, always. `run_case` ends in a `CaseOutcome` and never raises
an `Exception`: what one case runs into is its own error, not the run's.

The tool's own plumbing is not the skill's: creating the sandbox and copying
the workspace in are retried (nothing of the agent ran yet), and what still
fails there — or in starting the agent, or the case's gateway channel — ends
the case `infra_error`. Nothing is retried once the agent started: it may
have spent money. A case stopped by Ctrl-C/SIGTERM ends `interrupted`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent_eval_sandbox.errors import CopyOutInterrupted, DockerUnavailableError, UserError
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.interception import (
    Broker,
    CaseContext,
    build_container_settings,
)
from agent_eval_sandbox.interception.answerer import MeteredAnswerer
from agent_eval_sandbox.interception.broker import TimedAnswerer
from agent_eval_sandbox.lifecycle import CaseInfo, HookFailed, Phase
from agent_eval_sandbox.lifecycle.outputs import HookOutputs, write_hook_outputs
from agent_eval_sandbox.rundir.layout import CaseDir
from agent_eval_sandbox.rundir.models import CaseOutcome, EndReason
from agent_eval_sandbox.rundir.write import append_text, write_json
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.case_values import AgentRun, ChannelUse, PipelineRun, StagedCase
from agent_eval_sandbox.runner.collect import collect_case
from agent_eval_sandbox.runner.collect_steps import collect_pipeline
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.runner.step_loop import Pipeline
from agent_eval_sandbox.runner.workspace import stage_invocation_workspace
from agent_eval_sandbox.sandbox.archive import CopyOutReport
from agent_eval_sandbox.sandbox.base import BindMount, ExecResult, Sandbox, SandboxError, SandboxInfraError, SandboxSpec
from agent_eval_sandbox.sandbox.policy import sandbox_spec
from agent_eval_sandbox.sandbox.pool import DirectSandboxes, SandboxSource


class PlumbingError(Exception):
    """A part of the tool a case needs could not be had (its gateway channel): an `infra_error`."""


class CaseParts:
    """Everything a case holds open; `close()` releases it all, the sandbox back to where it came from.

    `sandboxes` gives the case its sandbox under `slot` (a pool made it while
    earlier cases ran) and removes it when given back (in the background).
    """

    def __init__(self, sandboxes: SandboxSource, slot: str) -> None:
        self.stack = contextlib.ExitStack()
        self.channel: Channel | None = None
        self.broker: Broker | None = None
        self.sandbox: Sandbox | None = None
        self.sandboxes, self.slot = sandboxes, slot

    def close(self) -> None:
        try:
            self.stack.close()
        finally:
            self.sandboxes.release(self.slot, self.sandbox)


def sandbox_mount_points(stage: Path) -> tuple[Path, Path]:
    """The case's channel directory and managed-settings file, made empty (idempotent).

    Its sandbox bind-mounts both, fixed when it is made — maybe ahead of the
    case, by a pool: the case then fills them in place (sockets, prompt,
    settings written into the same file, never replaced by another).
    """
    channel_dir, managed = stage / "run", stage / "managed-settings.json"
    channel_dir.mkdir(parents=True, mode=0o755, exist_ok=True)
    channel_dir.chmod(0o755)  # the sandbox user must reach the sockets through it
    managed.touch(mode=0o644)
    managed.chmod(0o644)
    return channel_dir, managed


def case_sandbox_spec(ctx: RunContext, case_id: str, stage: Path) -> SandboxSpec:
    """The spec of a case's sandbox: nothing of the case's data, only where it will be."""
    channel_dir, managed = sandbox_mount_points(stage)
    mounts = [BindMount(channel_dir, paths.RUN_DIR), BindMount(managed, paths.MANAGED_SETTINGS)]
    mounts += [BindMount(r.host_path, r.container_path) for r in ctx.resources]
    # The agent's launcher waits in the sandbox from the start: the case does not wait for its exec.
    return sandbox_spec(ctx.config.sandbox, image=ctx.image_ref, run_id=ctx.run_id, case_id=case_id,
                        timeout_s=ctx.settings.timeout_s, now=time.time(), mounts=mounts,
                        standby=ac.launcher_command())


# ---- the stages ------------------------------------------------------------------------


def prepare(ctx: RunContext, invocation: Invocation, slot: str, parts: CaseParts, status: CaseStatus) -> StagedCase:
    """Stage the workspace, the prompt and the settings; start the model upstream and the gateway channel.

    `slot` names the host staging directory: short, because the gateway's unix
    socket lives there and socket paths are limited to ~100 bytes.
    """
    status.state = "staging"
    out = ctx.run_dir.batch_logs if ctx.config.is_batch else ctx.run_dir.case(invocation.id).ensure()
    stage = ctx.staging / slot
    workspace, collected, transcripts = stage / "workspace", stage / "after", stage / "projects"
    for path in (collected, transcripts):
        path.mkdir(parents=True, exist_ok=True)
    channel_dir, managed = sandbox_mount_points(stage)
    (channel_dir / paths.PROMPT_FILE_NAME).write_text(invocation.prompt, encoding="utf-8")
    out.prompt.write_text(invocation.prompt, encoding="utf-8")
    for case in invocation.cases:
        shutil.copyfile(case.input_file, ctx.run_dir.case(case.id).ensure().input)
    stage_invocation_workspace(ctx.config, invocation, workspace, repo_copy=ctx.repo_copy, is_denied=ctx.is_denied)
    # A pipeline's steps each get execution.env with their own env over it in their environment
    # (runner/steps.py): in the workspace's settings it would win over a step's.
    workspace_env, _ = ({}, ()) if ctx.config.execution.steps else ac.workspace_env(ctx.config, ctx.host_environ)
    settings = build_container_settings(ctx.config, ctx.handlers, workspace_env=workspace_env)
    if settings.workspace_settings:
        (workspace / ".claude").mkdir(exist_ok=True)
        (workspace / ".claude" / "settings.json").write_text(json.dumps(settings.workspace_settings, indent=2))
    managed.write_text(json.dumps(settings.managed_settings, indent=2))  # in place: it may be mounted already
    upstream = parts.stack.enter_context(ctx.models.case_upstream(invocation))
    try:
        channel = ctx.gateway.open_channel(
            invocation.id,
            channel_dir / paths.GATEWAY_SOCKET_NAME,
            ctx.settings.max_budget_usd,
            out.gateway_log,
            upstream_url=upstream,
            cassette_path=out.cassette if ctx.models.records else None,
        )
    except (UserError, OSError) as exc:
        raise PlumbingError(f"the model gateway of the case could not start: {exc}") from exc
    parts.stack.callback(channel.close)
    parts.channel = channel
    status.channel_cost = lambda: channel.spent_usd
    return StagedCase(invocation, out, workspace, collected, transcripts, channel_dir, managed, settings, workspace_env)


# Creating a sandbox and copying the workspace in: tries, and the waits between them.
CREATE_ATTEMPTS = 3
CREATE_RETRY_DELAYS_S = (1.0, 3.0)


class LazySandbox:
    """The case's sandbox, created (and the staged workspace copied in) on first use.

    Host-scope before_each hooks prepare the staged workspace before it is
    copied in; a case whose before_each has no container-scope hook does not
    wait for a sandbox before its hooks. Creation and copy-in are retried
    (`CREATE_ATTEMPTS`): nothing of the case ran in the sandbox yet. What still
    fails is a `SandboxInfraError`.
    """

    def __init__(self, ctx: RunContext, staged: StagedCase, parts: CaseParts, status: CaseStatus) -> None:
        self._ctx, self._staged, self._parts, self._status = ctx, staged, parts, status
        self._copied: list[tuple[str, int, int]] = []

    @property
    def current(self) -> Sandbox | None:
        return self._parts.sandbox

    def get(self) -> Sandbox:
        if self._parts.sandbox is None:
            ctx = self._ctx
            self._status.state = "starting"
            for attempt in range(1, CREATE_ATTEMPTS + 1):
                if ctx.cancelled.is_set():
                    raise SandboxError(INTERRUPTED)
                try:
                    # The first attempt's was most likely made ahead (a pool); a retry's is always a new one.
                    self._parts.sandbox = self._parts.sandboxes.take(self._parts.slot, self._spec)
                    self._copy_in()
                    break
                except (SandboxError, DockerUnavailableError) as exc:
                    self._discard()
                    if attempt == CREATE_ATTEMPTS:
                        raise SandboxInfraError(
                            f"the sandbox could not be started ({attempt} attempts): {exc}") from exc
                    ctx.warn(f"{self._staged.invocation.id}: starting the sandbox failed, retrying: {exc}")
                    ctx.cancelled.wait(CREATE_RETRY_DELAYS_S[min(attempt, len(CREATE_RETRY_DELAYS_S)) - 1])
        assert self._parts.sandbox is not None
        return self._parts.sandbox

    def _spec(self) -> SandboxSpec:
        return case_sandbox_spec(self._ctx, self._staged.invocation.id, self._staged.channel_dir.parent)

    def _discard(self) -> None:
        """Remove a sandbox whose copy-in failed, so the next attempt starts clean."""
        box, self._parts.sandbox = self._parts.sandbox, None
        if box is not None:
            with contextlib.suppress(Exception):  # the run's teardown removes what this could not
                box.destroy()

    def _copy_in(self) -> None:
        assert self._parts.sandbox is not None
        self._parts.sandbox.copy_in(self._staged.workspace, paths.WORKSPACE, exclude=self._ctx.is_denied)
        self._copied = _snapshot(self._staged.workspace)

    def sync(self) -> None:
        """After a host hook changed the staged copy behind a running sandbox: send it in again."""
        if self._parts.sandbox is not None and _snapshot(self._staged.workspace) != self._copied:
            self._copy_in()


def before_each(ctx: RunContext, staged: StagedCase, sandbox: LazySandbox, status: CaseStatus) -> HookOutputs:
    """The before_each hooks; raises HookFailed when one that must not fail did."""
    case = staged.case
    if not ctx.per_case_hooks or case is None or not ctx.config.hooks.before_each:
        return HookOutputs()
    status.state = "before_each"
    phase = ctx.hooks.run(Phase.BEFORE_EACH, ctx.config.hooks.before_each, case=case, sandbox=sandbox.get)
    sandbox.sync()
    write_hook_outputs(staged.out.hook_outputs, phase.outputs.data)
    return phase.outputs


def start_broker(ctx: RunContext, staged: StagedCase, parts: CaseParts, agent_env: dict[str, str]) -> None:
    """The host side of the PreToolUse hook: it holds the handlers and the case's answers."""
    if not staged.settings.intercepts or ctx.handlers is None:
        return
    invocation = staged.invocation
    hook_model = parts.stack.enter_context(ctx.models.hook_answerer(invocation))
    answerer: TimedAnswerer | None = hook_model
    if hook_model is not None and parts.channel is not None:
        # The questions come from the sandbox and the calls use the host's credentials:
        # each one is paid from the case's budget, through its gateway channel.
        answerer = MeteredAnswerer(hook_model, parts.channel)
    context = CaseContext.from_case_dir(invocation.cases[0].dir) if not ctx.config.is_batch else CaseContext()
    broker = Broker(
        invocation.id,
        staged.channel_dir / paths.BROKER_SOCKET_NAME,
        ctx.handlers,
        context,
        # The environment the agent's own hook would see: settings env over the process env.
        {**agent_env, **staged.workspace_env},
        staged.out.tool_decisions,
        answerer=answerer,
        warn=ctx.warn,
    ).start()
    parts.stack.callback(broker.close)
    parts.broker = broker


def agent_start(ctx: RunContext, staged: StagedCase, sandbox: LazySandbox, parts: CaseParts,
                hook_outputs: HookOutputs) -> tuple[Sandbox, dict[str, str]]:
    """The sandbox, the agent's environment and the hook broker, just before the agent starts."""
    box = sandbox.get()
    env = ac.agent_environment(ctx.config, ctx.settings, host_environ=ctx.host_environ,
                               hook_env=ctx.global_hook_outputs.merged(hook_outputs).env)
    for key in env.dropped:
        ctx.warn(f"{staged.invocation.id}: {key} is set by the sandbox itself; the configured value is ignored")
    start_broker(ctx, staged, parts, env.env)
    if ctx.cancelled.is_set():  # its sandbox may have been made while the run's were being removed
        raise SandboxError(INTERRUPTED)
    if parts.channel is not None and not parts.channel.serving:
        raise PlumbingError("the model gateway of the case stopped serving before the agent started")
    return box, env.env


def run_agent(ctx: RunContext, staged: StagedCase, sandbox: LazySandbox, parts: CaseParts,
              hook_outputs: HookOutputs, status: CaseStatus) -> ExecResult:
    """`claude -p` in the sandbox, its output streamed to the case's logs, until it ends or its deadline."""
    box, env = agent_start(ctx, staged, sandbox, parts, hook_outputs)
    plugin_dirs = [r.container_path for r in ctx.resources if "/.staged-plugins/" in r.container_path]
    argv = ac.launcher_argv(ac.claude_argv(ctx.config, ctx.settings, plugin_dirs=plugin_dirs,
                                           extra_flags=staged.settings.cli_flags))
    status.state = "running"
    box.expect_copy_out([paths.WORKSPACE, TRANSCRIPTS], max_bytes=copy_out_cap(box), max_files=COPY_OUT_MAX_FILES)
    with open(staged.out.stdout_log, "wb") as stdout, open(staged.out.stderr_log, "wb") as stderr:
        return box.exec(argv, env=env, cwd=paths.WORKSPACE, stdout=stdout, stderr=stderr,
                        timeout=ctx.settings.timeout_s, on_timeout="freeze")


def run_pipeline(ctx: RunContext, staged: StagedCase, sandbox: LazySandbox, parts: CaseParts,
                 hook_outputs: HookOutputs, status: CaseStatus) -> tuple[ExecResult | None, PipelineRun]:
    """`execution.steps`: each step a `claude -p` of its own in the same sandbox (runner/step_loop.py)."""
    box, env = agent_start(ctx, staged, sandbox, parts, hook_outputs)
    pipeline = Pipeline(ctx, staged, box, parts.channel, env, status)
    steps = pipeline.run()
    return pipeline.last_result, PipelineRun(tuple(steps), pipeline.hard_stop, pipeline.cut)


# Whatever the agent wrote (frozen at the deadline or not) comes out under these caps.
COPY_OUT_MAX_FILES = 100_000
COPY_OUT_SLACK_BYTES = 64 * 1024 * 1024
TRANSCRIPTS = f"{paths.HOME}/.claude/projects"


def copy_out_cap(sandbox: Sandbox) -> int:
    return sandbox.spec.limits.workspace_bytes + COPY_OUT_SLACK_BYTES


def copy_out(ctx: RunContext, staged: StagedCase, sandbox: Sandbox, status: CaseStatus) -> None:
    status.state = "collecting"
    cap = copy_out_cap(sandbox)
    # Two volumes, so two archives (their only common parent is /): side by side, which helps when
    # they were taken at the agent's exit (Docker's archive API serves a container one at a time).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="copy-out") as other:
        # Ctrl-C stops both: an agent must not stretch how long the run takes to end by what it leaves.
        transcripts = other.submit(sandbox.copy_out, TRANSCRIPTS, staged.transcripts,
                                   max_bytes=cap, max_files=COPY_OUT_MAX_FILES, stop=ctx.cancelled)
        workspace = sandbox.copy_out(paths.WORKSPACE, staged.collected, max_bytes=cap, max_files=COPY_OUT_MAX_FILES,
                                     stop=ctx.cancelled)
        reports = [workspace, transcripts.result()]
    note_cut_trees(staged.out, reports)


def note_cut_trees(out: CaseDir, reports: Sequence[CopyOutReport]) -> None:
    """Say in the case's stderr.log which trees were too deep to collect (`archive.MAX_DEPTH`)."""
    cut = [entry for report in reports for entry in report.skipped if entry.kind == "too_deep"]
    if cut:
        append_text(out.stderr_log, "".join(f"\nNOTE: not collected: {e.path}/…: {e.detail}" for e in cut) + "\n")


def after_each(ctx: RunContext, staged: StagedCase, sandbox: Sandbox | None, copied_out: bool,
               status: CaseStatus) -> None:
    """Always runs; never raises. Host hooks get the workspace as the agent left it, as data:
    they run in the project root (`lifecycle.env.host_cwd`)."""
    case = staged.case
    if not ctx.per_case_hooks or case is None or not ctx.config.hooks.after_each:
        return
    status.state = "after_each"
    workspace = staged.collected if copied_out else staged.workspace
    needs_sandbox = any(h.scope == "container" for h in ctx.config.hooks.after_each)
    if needs_sandbox and sandbox is not None and sandbox.frozen and not sandbox.thaw():
        ctx.warn(f"{case.id}: the sandbox could not be resumed after its deadline; "
                 "container-scope after_each hooks will fail")
    ctx.hooks.run_safe(Phase.AFTER_EACH, ctx.config.hooks.after_each,
                       case=CaseInfo(case.id, workspace, case.source_dir, case.input_path, run_dir=case.run_dir),
                       sandbox=sandbox)


# ---- the pipeline ----------------------------------------------------------------------


INTERRUPTED = "the run was interrupted before this case started"


def run_case(ctx: RunContext, invocation: Invocation, status: CaseStatus, slot: str,
             sandboxes: SandboxSource | None = None) -> CaseOutcome:
    """Run one invocation and write its case files; never raises an Exception.

    `sandboxes`: where the case's sandbox comes from (default: made on demand, removed at the end)."""
    status.started = time.monotonic()
    started_wall = time.time()
    if ctx.cancelled.is_set():
        # Nothing of a case runs once the run is interrupted, its hooks least of all.
        return _ended(status, interrupted_outcome(ctx, invocation, started_wall))
    parts = CaseParts(sandboxes or DirectSandboxes(ctx.backend), slot)
    staged: StagedCase | None = None
    agent = AgentRun(error="the case did not start")
    try:
        try:
            staged = prepare(ctx, invocation, slot, parts, status)
            agent = _middle(ctx, staged, parts, status)
        finally:
            try:
                parts.close()
            except Exception as exc:  # the run's final teardown removes what is left
                if staged is not None:
                    agent = _with_error(agent, internal_error("tearing the case down", exc, staged.out))
        if staged is None:
            raise RuntimeError("prepare() returned nothing")
        use = ChannelUse.of(parts.channel)
        if agent.pipeline is not None:
            outcome = collect_pipeline(ctx, staged, agent, agent.pipeline, use, started_wall, status.elapsed)
        else:
            outcome = collect_case(ctx, staged, agent, use, started_wall, status.elapsed)
    except Exception as exc:  # preparing or collecting failed: still this case's error only
        out = staged.out if staged is not None else ctx.run_dir.case(invocation.id)
        reason: EndReason = "infra_error" if isinstance(exc, PlumbingError) else "error"
        outcome = uncollected_outcome(ctx, invocation, out, started_wall, status.elapsed, ChannelUse.of(parts.channel),
                                      internal_error("preparing the case" if staged is None else
                                                     "collecting the case's results", exc, out), end_reason=reason,
                                      result=agent.result)
    # Everything of it is in the run directory now; a long run would keep thousands of copies.
    shutil.rmtree(ctx.staging / slot, ignore_errors=True)
    return _ended(status, outcome)


def _ended(status: CaseStatus, outcome: CaseOutcome) -> CaseOutcome:
    status.final_cost = outcome.cost_usd or 0.0
    status.channel_cost = None  # the status lives as long as the run; the case's channel need not
    status.finished = time.monotonic()
    status.state = outcome.end_reason if outcome.end_reason != "exited" else (
        "done" if outcome.exit_code == 0 else f"exit {outcome.exit_code}")
    return outcome


def _middle(ctx: RunContext, staged: StagedCase, parts: CaseParts, status: CaseStatus) -> AgentRun:
    """before_each, the agent, copy out — then after_each, whatever happened."""
    sandbox = LazySandbox(ctx, staged, parts, status)
    result: ExecResult | None = None
    pipeline: PipelineRun | None = None
    copied = False
    try:
        hook_outputs = before_each(ctx, staged, sandbox, status)
        if ctx.config.execution.steps:
            result, pipeline = run_pipeline(ctx, staged, sandbox, parts, hook_outputs, status)
        else:
            result = run_agent(ctx, staged, sandbox, parts, hook_outputs, status)
        # Host-side truth the agent cannot fake: its socket file is mounted read-only and the
        # server thread is ours. A gateway that stopped serving failed the agent, not the reverse.
        gateway_down = parts.channel is not None and not parts.channel.serving
        copy_out(ctx, staged, sandbox.get(), status)
        copied = True
        if gateway_down:
            return AgentRun(result=result, error="the model gateway of the case stopped serving while the agent ran",
                            copied_out=True, infra=True, pipeline=pipeline)
        return AgentRun(result=result, copied_out=True, pipeline=pipeline)
    except HookFailed as exc:
        return AgentRun(result=result, error=exc.render(), hook_failed=True, copied_out=copied, pipeline=pipeline)
    except UserError as exc:
        return AgentRun(result=result, error=exc.render(), copied_out=copied, pipeline=pipeline)
    except CopyOutInterrupted as exc:  # ends `interrupted` (runner/ending.py), with what it had collected
        return AgentRun(result=result, error=str(exc), copied_out=False, pipeline=pipeline)
    except (SandboxInfraError, PlumbingError) as exc:
        return AgentRun(result=result, error=str(exc), copied_out=copied, infra=True, pipeline=pipeline)
    except SandboxError as exc:
        return AgentRun(result=result, error=str(exc), copied_out=copied, pipeline=pipeline)
    except Exception as exc:  # whatever this case ran into (a limit it pushed the host to, a bug) is its own
        return AgentRun(result=result, error=internal_error("running the case", exc, staged.out),
                        copied_out=copied, pipeline=pipeline)
    finally:
        after_each(ctx, staged, sandbox.current, copied, status)


def _with_error(agent: AgentRun, error: str) -> AgentRun:
    return agent if agent.error else dataclasses.replace(agent, error=error)


def internal_error(action: str, exc: Exception, out: CaseDir) -> str:
    """One line for the results; the traceback goes to the case's stderr.log."""
    message = f"{action} failed: {type(exc).__name__}: {exc}"
    with contextlib.suppress(OSError):
        append_text(out.stderr_log, f"\nERROR: {message}\n" + "".join(traceback.format_exception(exc)))
    return message


def interrupted_outcome(ctx: RunContext, invocation: Invocation, started_wall: float | None = None) -> CaseOutcome:
    """The outcome of a case the run was stopped before (its case directory gets it too)."""
    return uncollected_outcome(ctx, invocation, ctx.run_dir.case(invocation.id), started_wall, 0.0, ChannelUse(),
                               INTERRUPTED, end_reason="interrupted")


def uncollected_outcome(ctx: RunContext, invocation: Invocation, out: CaseDir, started_wall: float | None,
                        duration: float, channel: ChannelUse, error: str,
                        end_reason: EndReason = "error", result: ExecResult | None = None) -> CaseOutcome:
    """The case's outcome when its results could not be collected: an error, never a crashed run.
    Once the run is interrupted, `interrupted`. `result`: the agent's command, when it ran — a case
    whose agent ran (and spent) is never recorded as one that did not."""
    outcome = CaseOutcome(
        case_id=invocation.id,
        cases=[c.id for c in invocation.cases],
        exit_code=result.exit_code if result is not None else None,
        signal=result.signal if result is not None else None,
        agent_duration_s=round(result.duration_s, 3) if result is not None else None,
        end_reason="interrupted" if ctx.cancelled.is_set() else end_reason,
        duration_s=round(duration, 3),
        started_at=started_wall,
        cost_usd=channel.gateway.spent_usd,
        gateway=channel.gateway,
        model=ctx.settings.model,
        error=error,
    )
    if not ctx.config.is_batch:
        with contextlib.suppress(OSError):
            write_json(out.ensure().result, outcome.to_data())
    return outcome


def _snapshot(root: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    )

