"""How a case ended, from the facts collected about it (pure).

The sandbox says how the agent's command ended (`ExecResult`), the gateway
whether it refused requests for the budget, the CLI's own stream whether it
stopped at its budget, did not know the skill, or had its background tasks
killed, a replayed case's cassette whether the agent asked for what it holds.
Together they give the case's end reason, exit code, the limits it hit, and
the notes appended to its stderr.log.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_eval_sandbox.rundir.models import EndReason
from agent_eval_sandbox.runner.events import StreamSummary
from agent_eval_sandbox.sandbox.base import EndReason as ExecEnd
from agent_eval_sandbox.sandbox.base import ExecResult

# The launcher's own exit codes (inside/run_agent.py) when it did not start the agent: it could not,
# or the case's gateway socket took no connection.
LAUNCH_FAILED = 125
GATEWAY_UNREACHABLE = 124


@dataclass(frozen=True)
class Ending:
    end_reason: EndReason
    exit_code: int | None
    limits_hit: tuple[str, ...]
    notes: tuple[str, ...]  # for the case's stderr.log, one line each


def end_reason_of(result: ExecResult | None, *, refused: int, cli_budget_stop: bool, hook_failed: bool,
                  replay_mismatch: bool = False) -> EndReason:
    if hook_failed:
        return "hook_failed"
    if result is None:
        return "error"
    # The agent ran against a cassette that did not hold its requests: whatever came after is drift.
    if replay_mismatch:
        return "replay_mismatch"
    if result.end_reason is ExecEnd.TIMED_OUT:
        return "timed_out"
    if result.end_reason is ExecEnd.OOM_KILLED:
        return "oom_killed"
    if result.end_reason is ExecEnd.SIGNALED:
        return "signaled"
    if result.exit_code in (LAUNCH_FAILED, GATEWAY_UNREACHABLE):
        return "error"
    if refused or cli_budget_stop:
        return "budget_exhausted"
    return "exited"


def limits_hit_of(result: ExecResult | None, *, refused: int, cli_budget_stop: bool) -> tuple[str, ...]:
    hit = []
    if result is not None:
        if result.end_reason is ExecEnd.TIMED_OUT:
            hit.append("deadline")
        if result.oom_kills:
            hit.append("memory")
        if result.pids_limit_hit:
            hit.append("pids")
        if result.output_truncated:
            hit.append("output")
    if refused or cli_budget_stop:
        hit.append("budget")
    return tuple(hit)


# What the teardown of an interrupted run does to a case that was running.
ENDED_BY_INTERRUPT: frozenset[str] = frozenset({"error", "signaled", "infra_error"})


def ending(
    result: ExecResult | None,
    summary: StreamSummary,
    *,
    refused: int,
    hook_failed: bool,
    error: str | None,
    background_killed: bool,
    timeout_s: float,
    budget_usd: float,
    replay_mismatch: str | None = None,
    infra: bool = False,
    interrupted: bool = False,
) -> Ending:
    """`replay_mismatch`: a replayed case's mismatch (its one line), if it had one; `infra`: the tool's own
    plumbing failed (`AgentRun.infra`); `interrupted`: the run was stopped (Ctrl-C/SIGTERM) while the case ran,
    so an error or a signal is the teardown's doing."""
    budget_stop = summary.budget_exhausted
    agent_reason = end_reason_of(result, refused=refused, cli_budget_stop=budget_stop, hook_failed=hook_failed,
                                 replay_mismatch=replay_mismatch is not None)
    # An error of the case's own after the agent ran (its sandbox broke, copy-out failed): whatever the
    # command did, the case's results are not all there.
    reason: EndReason = ("error" if error is not None and agent_reason not in ("hook_failed", "replay_mismatch")
                         else agent_reason)
    if infra and agent_reason not in ("hook_failed", "replay_mismatch"):
        reason = "infra_error"
    if interrupted and reason in ENDED_BY_INTERRUPT:
        reason = "interrupted"
    exit_code = result.exit_code if result is not None else None
    notes: list[str] = []
    if agent_reason == "timed_out":
        exit_code = -1
        notes.append(f"ERROR: timed out after {timeout_s:g}s; the sandbox was frozen and removed")
    if exit_code == 0 and summary.unknown_command:
        exit_code = 1
        notes.append(
            f"ERROR: the agent did not recognise '{summary.unknown_command}' (0 turns, no work performed): "
            "the skill is not discoverable — check its name, .claude/skills, or runner.plugin_dirs"
        )
    if exit_code == 0 and not budget_stop and (summary.is_error or summary.result is None):
        # The CLI exits 0 after an interrupt of its session (SIGINT in a tool call: found by the red
        # team, the agent can send it) with an error result and no answer: never a clean run.
        exit_code = 1
        notes.append(f"ERROR: the CLI exited 0 but {_what_the_result_says(summary)}: its session did not complete")
    if exit_code == 0 and background_killed:
        exit_code = 1
        notes.append(
            "ERROR: the CLI terminated still-running background tasks at the bg-wait ceiling; raise "
            "CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS (runner.env) for long-running skills"
        )
    if refused:
        notes.append(f"ERROR: the gateway refused {refused} request(s): the case budget of ${budget_usd:g} was spent")
    if error:
        notes.append(f"ERROR: {error}")
    if reason == "replay_mismatch":
        notes.append(f"ERROR: {replay_mismatch}")
    limits = limits_hit_of(result, refused=refused, cli_budget_stop=budget_stop)
    return Ending(reason, exit_code, limits, tuple(notes))


def _what_the_result_says(summary: StreamSummary) -> str:
    result = summary.result
    if result is None:
        return "wrote no result"
    said = [f"{key} {result[key]}" for key in ("subtype", "terminal_reason") if isinstance(result.get(key), str)]
    why = ", ".join(said)
    return f"its result is an error ({why})" if why else "its result is an error"
