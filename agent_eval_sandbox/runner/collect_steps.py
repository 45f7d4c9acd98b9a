"""The last stage of a pipeline's case: its steps' records become the case's (`CaseOutcome.steps`).

Each step's stream was already checked against that step's own record of the
conversation and written to `steps/<id>/events.json` by the step loop. The
case's own files are the whole case: `events.json` is the steps' events in
order (each marked with its `step`), `stdout.log` the steps' logs one after the
other, `stderr.log` gets each step's under a header; the workspace's changes,
outputs and transcripts are collected as for any case.
"""

from __future__ import annotations

from typing import Any

from agent_eval_sandbox.rundir.layout import CaseDir
from agent_eval_sandbox.rundir.models import CaseOutcome, Changes, EndReason, Integrity, StepOutcome
from agent_eval_sandbox.rundir.read import MAX_EVENTS_BYTES, MAX_EVENTS_NODES, read_data
from agent_eval_sandbox.rundir.write import append_text, write_json
from agent_eval_sandbox.runner.case_values import AgentRun, ChannelUse, PipelineRun, StagedCase
from agent_eval_sandbox.runner.collect import collect_files
from agent_eval_sandbox.runner.context import RunContext
from agent_eval_sandbox.runner.ending import ENDED_BY_INTERRUPT
from agent_eval_sandbox.runner.steps import pipeline_ending, pipeline_totals

# The limit a pipeline cut short reached (as `runner/ending.py` names them).
CUT_LIMITS = {"timed_out": ("deadline",), "budget_exhausted": ("budget",)}


def collect_pipeline(ctx: RunContext, staged: StagedCase, agent: AgentRun, pipeline: PipelineRun,
                     channel: ChannelUse, started_wall: float, duration: float) -> CaseOutcome:
    out = staged.out
    steps = list(pipeline.steps)
    merge_step_files(out, steps)
    totals = pipeline_totals(steps)
    changes, stopped = collect_files(ctx, staged, agent, totals.session_id)
    error = agent.error or stopped
    end = pipeline_ending(steps, pipeline.hard_stop, pipeline.cut)
    reason: EndReason = end.end_reason
    if error is not None and reason not in ("hook_failed",):
        reason = "error"
    if agent.infra and reason != "hook_failed":
        reason = "infra_error"
    if ctx.cancelled.is_set() and reason in ENDED_BY_INTERRUPT:
        reason = "interrupted"
    result = agent.result
    outcome = CaseOutcome(
        case_id=staged.invocation.id,
        cases=[c.id for c in staged.invocation.cases],
        exit_code=end.exit_code,
        end_reason=reason,
        signal=result.signal if result else None,
        duration_s=round(duration, 3),
        agent_duration_s=totals.agent_duration_s,
        started_at=started_wall,
        token_usage=channel.usage if channel.gateway.requests else totals.cli_token_usage,
        cli_token_usage=totals.cli_token_usage,
        cost_usd=round(max(channel.gateway.spent_usd, totals.cli_cost_usd or 0.0), 6),
        cli_cost_usd=totals.cli_cost_usd,
        gateway=channel.gateway,
        num_turns=totals.num_turns,
        permission_denials=totals.permission_denials,
        limits_hit=list(dict.fromkeys([*totals.limits_hit, *CUT_LIMITS.get(pipeline.cut or "", ())])),
        oom_kills=result.oom_kills if result else None,
        session_id=totals.session_id,
        model=ctx.settings.model,
        result=totals.result,
        changes=Changes.listing(changes.added, changes.modified, changes.deleted),
        integrity=Integrity(**totals.integrity),
        error=error,
        steps=steps,
    )
    write_json(out.result, outcome.to_data())
    return outcome


def merge_step_files(out: CaseDir, steps: list[StepOutcome]) -> None:
    """The case's events.json, stdout.log and stderr.log from its steps'."""
    events: list[Any] = []
    with open(out.stdout_log, "wb") as stdout:
        for step in steps:
            own = out.step(step.step_id)
            if own.stdout_log.is_file():
                with open(own.stdout_log, "rb") as source:
                    while chunk := source.read(1 << 20):
                        stdout.write(chunk)
            data, _ = read_data(own.events, max_bytes=MAX_EVENTS_BYTES, max_nodes=MAX_EVENTS_NODES)
            if isinstance(data, list):
                events += [{**e, "step": step.step_id} for e in data if isinstance(e, dict)]
            why = f" (not run: {step.skipped})" if step.skipped else ""
            text = own.stderr_log.read_text(encoding="utf-8", errors="replace") if own.stderr_log.is_file() else ""
            append_text(out.stderr_log, f"--- step {step.step_id}{why} ---\n{text}")
    write_json(out.events, events)
