"""The pipeline stage of a case (`execution.steps`): each step a fresh `claude -p` in the case's sandbox.

    steps = run_steps(ctx, staged, box, channel, base_env, status)

Per step, in order: what is left of the case's deadline and budget bounds the
step's own (`steps.step_limits`); its prompt is rendered with the earlier
steps' views; before_step hooks; the gateway channel starts a fresh record of
the conversation and the step's cap (`Channel.begin_step`) and, offline, the
step's own script; the agent runs; the step's stream is checked against that
step's record alone (a later step cannot pass an earlier step's answers off
as its own) into `steps/<id>/events.json`; after_step hooks; its
`StepOutcome`. A step that fails stops the rest when its `on_failure` is
`fail`; the case's deadline, budget, an interrupt or a broken sandbox stop
them whatever it says.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.lifecycle import CaseInfo, HookFailed, Phase
from agent_eval_sandbox.rundir.layout import CaseDir
from agent_eval_sandbox.rundir.models import EndReason, GatewayUse, Integrity, StepOutcome, bounded_denials
from agent_eval_sandbox.rundir.write import append_text, write_json
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.case_values import TOKEN_KEYS, StagedCase
from agent_eval_sandbox.runner.collect import read_agent_stream
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.ending import ending
from agent_eval_sandbox.runner.events import background_tasks_killed
from agent_eval_sandbox.runner.integrity import StreamVerifier
from agent_eval_sandbox.runner.steps import (
    StepLimits,
    StepPlan,
    StepView,
    changed_files,
    parse_listing,
    plan_steps,
    skipped_step,
    step_limits,
    step_prompt,
    stops_pipeline,
)
from agent_eval_sandbox.sandbox import process_scripts as ps
from agent_eval_sandbox.sandbox.base import EndReason as ExecEnd
from agent_eval_sandbox.sandbox.base import ExecResult, Sandbox, SandboxError

# What `.files` is measured with: every regular file of the workspace, its size and mtime.
LISTING_ARGV = tuple(ps.interpreter(ps.LIST_FILES, paths.WORKSPACE))
LISTING_TIMEOUT_S = 60.0
# SIGKILL to every process the agent's user may signal (kill(-1) spares only the caller): run as that user.
KILL_LEFTOVERS_ARGV = tuple(ps.interpreter(ps.KILL_LEFTOVERS))
# It ends in milliseconds (a fork bomb's too), or never: what it is to kill has stopped it.
KILL_LEFTOVERS_TIMEOUT_S = 10.0
LISTING_MAX_BYTES = 16 * 1024 * 1024


class Pipeline:
    """The steps of one case, run in order; `run()` returns every step's outcome (run or skipped)."""

    def __init__(self, ctx: RunContext, staged: StagedCase, box: Sandbox, channel: Channel | None,
                 base_env: Mapping[str, str], status: CaseStatus) -> None:
        self.ctx, self.staged, self.box, self.channel, self.status = ctx, staged, box, channel, status
        self.base_env = dict(base_env)
        self.plans = plan_steps(ctx.config, ctx.settings, ctx.host_environ)
        self.case_upstream = channel.upstream_url if channel is not None else None
        self.hard_stop: StepOutcome | None = None
        self.cut: EndReason | None = None  # the case's deadline, budget, an interrupt cut the pipeline short
        self.last_result: ExecResult | None = None  # the last step's exec
        self.broken: str | None = None  # the sandbox failed under a step: no later step can run

    def run(self) -> list[StepOutcome]:
        outcomes: list[StepOutcome] = []
        views: dict[str, StepView] = {}
        started = time.monotonic()
        stop: str | None = None
        for plan in self.plans:
            if stop is None:
                cut = self._case_stop(started)
                if cut is not None:
                    stop, self.cut = cut
                    if outcomes and not outcomes[-1].completed:
                        self.hard_stop = outcomes[-1]  # the step the case's deadline or budget stopped
            if stop is not None:
                outcome = skipped_step(plan, stop)
            else:
                left_s = self.ctx.settings.timeout_s - (time.monotonic() - started)
                left_usd = (self.channel.ledger.left_usd if self.channel is not None
                            else self.ctx.settings.max_budget_usd)
                limits = step_limits(plan, case_left_s=left_s, case_left_usd=left_usd)
                outcome = self._step(plan, limits, views)
                views[plan.id] = StepView.of(outcome)
                if self.box.frozen or (limits.case_deadline and outcome.end_reason == "timed_out"):
                    stop, self.cut = "the case's deadline passed", "timed_out"
                elif self.broken is not None:
                    stop = f"the case's sandbox failed in step {plan.id}: {self.broken}"
                else:
                    stop = stops_pipeline(outcome)
                if stop is not None and outcome.on_failure == "continue":
                    self.hard_stop = outcome  # a step that may fail stopped the pipeline all the same
            write_json(self.out(plan).ensure().result, outcome.to_data())
            outcomes.append(outcome)
        return outcomes

    def out(self, plan: StepPlan) -> CaseDir:
        return self.staged.out.step(plan.id)

    def _case_stop(self, started: float) -> tuple[str, EndReason] | None:
        """Why no further step may start whatever the steps' on_failure, and how that ends the case."""
        if self.ctx.cancelled.is_set():
            return "the run was interrupted", "interrupted"
        if time.monotonic() - started >= self.ctx.settings.timeout_s:
            return "the case's deadline passed", "timed_out"
        if self.channel is not None and self.channel.ledger.left_usd <= 0:
            return "the case's budget is spent", "budget_exhausted"
        if self.channel is not None and not self.channel.serving:
            return "the model gateway of the case stopped serving", "infra_error"
        return None

    # ---- one step --------------------------------------------------------------------------

    def _step(self, plan: StepPlan, limits: StepLimits, views: Mapping[str, StepView]) -> StepOutcome:
        ctx, staged, out = self.ctx, self.staged, self.out(plan).ensure()
        case = staged.invocation.cases[0]
        self.status.state = f"step {plan.id}"
        started_wall, started = time.time(), time.monotonic()
        base: dict[str, Any] = {"step_id": plan.id, "index": plan.index, "on_failure": plan.on_failure,
                                "started_at": started_wall, "timeout_s": round(limits.timeout_s, 3),
                                "budget_usd": round(limits.budget_usd, 6)}
        try:
            prompt = step_prompt(plan, case, views, ctx.loaded.path)
        except UserError as exc:
            return StepOutcome(**base, end_reason="error", error=exc.render(), duration_s=0.0)
        out.prompt.write_text(prompt, encoding="utf-8")
        info = self._case_info(plan)
        try:
            if ctx.config.hooks.before_step and ctx.per_case_hooks:
                ctx.hooks.run(Phase.BEFORE_STEP, ctx.config.hooks.before_step, case=info, sandbox=self.box)
        except HookFailed as exc:
            return StepOutcome(**base, end_reason="hook_failed", error=exc.render(),
                               duration_s=round(time.monotonic() - started, 3))
        spent, usage, requests, refused = self._channel_counts()
        result: ExecResult | None = None
        error: str | None = None
        files: list[str] = []
        with ctx.models.step_upstream(staged.invocation, plan.id) as upstream:
            if self.channel is not None:
                self.channel.begin_step(limits.budget_usd, upstream or self.case_upstream)
            try:
                listed = self._listing()
                result = self.last_result = self._exec(plan, limits, plan.env, out, prompt)
                if not self.box.frozen:
                    self._end_leftovers()
                    files = changed_files(listed, self._listing())
            except SandboxError as exc:
                error = self.broken = str(exc)
            record = self.channel.conversation.snapshot() if self.channel is not None else None
        verifier = StreamVerifier(record)
        _, summary = read_agent_stream(out.stdout_log, out.events, verifier)
        spent2, usage2, requests2, refused2 = self._channel_counts()
        gateway = GatewayUse(requests=requests2 - requests, refused=refused2 - refused,
                             spent_usd=round(spent2 - spent, 6))
        stderr_text = out.stderr_log.read_text(encoding="utf-8", errors="replace") if out.stderr_log.exists() else ""
        end = ending(result, summary, refused=gateway.refused, hook_failed=False, error=error,
                     background_killed=background_tasks_killed(stderr_text), timeout_s=limits.timeout_s,
                     budget_usd=limits.budget_usd, interrupted=ctx.cancelled.is_set())
        if end.notes:
            append_text(out.stderr_log, "".join(f"\n{note}" for note in end.notes) + "\n")
        if self.ctx.config.hooks.after_step and ctx.per_case_hooks:
            if self.box.frozen:
                self.box.thaw()
            ctx.hooks.run_safe(Phase.AFTER_STEP, ctx.config.hooks.after_step, case=info, sandbox=self.box)
        token_delta = {k: usage2.get(k, 0) - usage.get(k, 0) for k in TOKEN_KEYS}
        return StepOutcome(
            **base,
            exit_code=end.exit_code,
            end_reason=end.end_reason,
            signal=result.signal if result else None,
            duration_s=round(time.monotonic() - started, 3),
            agent_duration_s=round(result.duration_s, 3) if result else None,
            token_usage=token_delta if gateway.requests else summary.token_usage,
            cost_usd=round(max(gateway.spent_usd, summary.cost_usd or 0.0), 6),
            cli_cost_usd=summary.cost_usd,
            gateway=gateway,
            num_turns=summary.num_turns,
            permission_denials=bounded_denials(summary.permission_denials),
            limits_hit=list(end.limits_hit),
            session_id=summary.session_id,
            result=summary.result_text,
            files=files,
            integrity=Integrity(**verifier.report()),
            error=error,
        )

    def _case_info(self, plan: StepPlan) -> CaseInfo:
        case = self.staged.invocation.cases[0]
        return CaseInfo(case.id, self.staged.workspace, case.dir, case.input_file, run_dir=self.staged.out.path,
                        step_id=plan.id, step_index=plan.index)

    def _channel_counts(self) -> tuple[float, dict[str, int], int, int]:
        channel = self.channel
        if channel is None:
            return 0.0, {}, 0, 0
        usage = {k: int(v) for k, v in channel.usage.model_dump().items() if k in TOKEN_KEYS}
        return channel.spent_usd, usage, channel.requests, channel.refused

    def _end_leftovers(self) -> None:
        """Kill what the step left running (`setsid nohup … &` outlives the CLI): before the step's files and
        costs are taken, so that nothing of it writes, spends or is counted in a later step.

        The killer runs as the agent's user, so what it is to kill may kill or stop it first (the
        twelfth round's third helper): unless it says none is left, the sandbox counts as broken and
        no later step runs in it."""
        done = self.box.exec(list(KILL_LEFTOVERS_ARGV), user=self.box.spec.hardening.user,
                             timeout=KILL_LEFTOVERS_TIMEOUT_S, on_timeout="kill_exec")
        if not done.ok:
            raise SandboxError(f"what the step left running could not be ended ({_how(done)})")

    def _listing(self) -> dict[str, tuple[int, str]]:
        """The workspace's files as the step's own `.files` compares them. A listing that did not finish
        (killed or stopped by what the agent left running) is an error, never an empty change."""
        listed = self.box.exec(list(LISTING_ARGV), timeout=LISTING_TIMEOUT_S, on_timeout="kill_exec",
                               max_output_bytes=LISTING_MAX_BYTES)
        if not listed.ok:
            raise SandboxError(f"the workspace's files could not be listed ({_how(listed)})")
        return parse_listing(listed.stdout or b"")

    def _exec(self, plan: StepPlan, limits: StepLimits, step_env: Mapping[str, str], out: CaseDir,
              prompt: str) -> ExecResult:
        ctx = self.ctx
        settings = ctx.settings
        step_settings = dataclasses.replace(settings, max_budget_usd=limits.budget_usd)
        plugin_dirs = [r.container_path for r in ctx.resources if "/.staged-plugins/" in r.container_path]
        argv = ac.launcher_argv(ac.claude_argv(plan.config, step_settings, plugin_dirs=plugin_dirs,
                                               extra_flags=self.staged.settings.cli_flags),
                                prompt_file=ac.PROMPT_ON_STDIN)
        env = dict(self.base_env)
        env.update({k: v for k, v in step_env.items() if k not in ac.MANAGED_KEYS})
        self.status.state = f"running {plan.id}"
        with open(out.stdout_log, "wb") as stdout, open(out.stderr_log, "wb") as stderr:
            # Only the case's own deadline freezes the sandbox: after a step's earlier one the rest may run.
            return self.box.exec(argv, env=env, cwd=paths.WORKSPACE, stdin=prompt.encode("utf-8"),
                                 stdout=stdout, stderr=stderr,
                                 timeout=limits.timeout_s,
                                 on_timeout="freeze" if limits.case_deadline else "kill_exec")


def _how(result: ExecResult) -> str:
    """How one of the tool's own commands ended, when not as it should."""
    if result.exit_code is not None and result.end_reason is ExecEnd.EXITED:
        return f"exit {result.exit_code}"
    return result.end_reason.value + (f", signal {result.signal}" if result.signal else "")
