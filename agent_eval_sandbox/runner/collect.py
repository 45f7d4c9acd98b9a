"""The last stage of a case: what came out of its sandbox becomes its case files and its `CaseOutcome`.

Everything here works on host directories the sandbox was already copied out
to: the agent's workspace after the run, the pristine staged copy before it,
and `$HOME/.claude/projects` holding the session transcripts; plus the CLI's
output as streamed to stdout.log, checked against the gateway's record.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.rundir.layout import CaseDir, RunDir
from agent_eval_sandbox.rundir.models import CaseOutcome, Changes, Integrity, bounded_denials
from agent_eval_sandbox.rundir.write import append_text, write_json, write_text, write_yaml
from agent_eval_sandbox.runner.batch import assign_files
from agent_eval_sandbox.runner.case_values import AgentRun, ChannelUse, StagedCase
from agent_eval_sandbox.runner.changes import CollectionInterrupted, WorkspaceChanges, check_stop, compare, diff_chunks
from agent_eval_sandbox.runner.context import RunContext
from agent_eval_sandbox.runner.ending import GATEWAY_UNREACHABLE, ending
from agent_eval_sandbox.runner.events import (
    StreamReader,
    StreamSummary,
    background_tasks_killed,
    stream_objects,
)
from agent_eval_sandbox.runner.integrity import StreamVerifier, verified
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.sandbox.base import ExecResult


def collect_case(ctx: RunContext, staged: StagedCase, agent: AgentRun, channel: ChannelUse, started_wall: float,
                 duration: float) -> CaseOutcome:
    """Write the case's files (events, transcript, changes, outputs) and its run_result.json."""
    config, out, result = ctx.config, staged.out, agent.result
    verifier = StreamVerifier(channel.conversation)
    _, summary = read_agent_stream(out.stdout_log, out.events, verifier)
    changes, stopped = collect_files(ctx, staged, agent, summary.session_id)
    error = agent.error or stopped
    stderr_text = out.stderr_log.read_text(encoding="utf-8", errors="replace") if out.stderr_log.exists() else ""
    mismatch = ctx.models.replay_mismatch(staged.invocation)
    end = ending(result, summary, refused=channel.gateway.refused, hook_failed=agent.hook_failed, error=error,
                 background_killed=background_tasks_killed(stderr_text), timeout_s=ctx.settings.timeout_s,
                 budget_usd=ctx.settings.max_budget_usd, replay_mismatch=mismatch.summary if mismatch else None,
                 infra=agent.infra or gateway_unreachable(result, channel), interrupted=ctx.cancelled.is_set())
    if end.end_reason == "replay_mismatch" and mismatch is not None:
        write_text(out.replay_diff, mismatch.diff)
        error = f"{mismatch.summary} (diff: {out.replay_diff.name})" + (f"; {error}" if error else "")
    notes = [*_integrity_notes(verifier), *end.notes]
    if notes:
        append_text(out.stderr_log, "".join(f"\n{note}" for note in notes) + "\n")
    outcome = CaseOutcome(
        case_id=staged.invocation.id,
        cases=[c.id for c in staged.invocation.cases],
        exit_code=end.exit_code,
        end_reason=end.end_reason,
        signal=result.signal if result else None,
        duration_s=round(duration, 3),
        agent_duration_s=round(result.duration_s, 3) if result else None,
        started_at=started_wall,
        # What the gateway paid for is the truth; the CLI's own count comes through its stream.
        token_usage=channel.usage if channel.gateway.requests else summary.token_usage,
        cli_token_usage=summary.token_usage,
        cost_usd=round(max(channel.gateway.spent_usd, summary.cost_usd or 0.0), 6),
        cli_cost_usd=summary.cost_usd,
        gateway=channel.gateway,
        num_turns=summary.num_turns,
        permission_denials=bounded_denials(summary.permission_denials),
        limits_hit=list(end.limits_hit),
        oom_kills=result.oom_kills if result else None,
        session_id=summary.session_id,
        model=summary.model or ctx.settings.model,
        result=summary.result_text,
        changes=Changes.listing(changes.added, changes.modified, changes.deleted),
        integrity=Integrity(**verifier.report()),
        error=error,
    )
    if not config.is_batch:
        write_json(out.result, outcome.to_data())
    return outcome


def collect_files(ctx: RunContext, staged: StagedCase, agent: AgentRun,
                  session_id: str | None) -> tuple[WorkspaceChanges, str | None]:
    """The transcripts, the workspace's changes (`_modified/`, workspace.diff) and the outputs, into the case's
    directory: (the changes, None), or, once the run is interrupted, (what was compared, why it stopped) —
    an agent must not stretch how long the run takes to end by how many files it leaves."""
    out, config, stop = staged.out, ctx.config, ctx.cancelled
    changes = WorkspaceChanges()
    try:
        collect_transcripts(staged.transcripts, session_id, out.path, stop)
        if agent.result is not None and agent.copied_out:
            mounted = tuple(r.container_path.removeprefix(paths.WORKSPACE + "/") for r in ctx.resources
                            if r.container_path.startswith(paths.WORKSPACE + "/"))
            changes = collect_changes(staged.workspace, staged.collected, out.path, mounted, stop)
            if config.is_batch:
                split_batch_outputs(config, ctx.run_dir, staged.invocation, staged.collected, stop)
            else:
                collect_outputs(config, staged.collected, out.path, stop)
    except CollectionInterrupted as exc:
        return (exc.changes if exc.changes is not None else changes), str(exc)
    return changes, None


def gateway_unreachable(result: ExecResult | None, channel: ChannelUse) -> bool:
    """The launcher found the gateway socket taking no connection, and the gateway agrees: it saw no
    request. Before the agent started nothing of the skill ran, so this is the tool's failure."""
    return result is not None and result.exit_code == GATEWAY_UNREACHABLE and channel.gateway.requests == 0


def _integrity_notes(verifier: StreamVerifier) -> list[str]:
    if not verifier.findings:
        return []
    if verifier.dropped:
        return [f"WARNING: {verifier.dropped} line(s) of the agent's output were not what the model sent "
                "and were dropped (see integrity in run_result.json)"]
    return ["WARNING: the agent's output disagreed with the model gateway's record; "
            "the gateway's values were used (see integrity in run_result.json)"]


def read_agent_stream(stdout_log: Path, events: Path, verifier: StreamVerifier
                      ) -> tuple[list[dict[str, Any]], StreamSummary]:
    """events.json (written to `events`) and the stream summary, from the lines of `stdout_log` the
    gateway's record vouches for.

    Read line by line: the host's memory does not grow with what the agent printed.
    """
    reader = StreamReader()
    if stdout_log.is_file():
        with open(stdout_log, encoding="utf-8", errors="replace") as lines:
            for obj in verified(stream_objects(lines), verifier):
                reader.feed(obj)
    write_json(events, reader.events)
    return reader.events, reader.summary()


def split_batch_outputs(config: EvalConfig, run: RunDir, invocation: Invocation, after: Path,
                        stop: threading.Event | None = None) -> None:
    """Batch mode: each outputs[].path file goes to the case its name belongs to."""
    for output in config.outputs:
        if not output.path:
            continue
        source = after / output.path
        if not source.is_dir():
            continue
        files = [p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file() and not p.is_symlink()]
        assigned = assign_files(files, list(invocation.case_order), output.batch_pattern)
        for case_id, names in assigned.items():
            for name in names:
                check_stop(stop, f"while copying {output.path}")
                _copy_file(source / name, run.case(case_id).output(output.path) / name)
    write_yaml(run.case_order, list(invocation.case_order))


def _copy_file(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest, follow_symlinks=False)


def _copy_dir_files(src: Path, dest: Path, stop: threading.Event | None, what: str) -> int:
    count = 0
    for path in sorted(src.rglob("*")):
        check_stop(stop, f"while copying {what}")
        if path.is_symlink() or not path.is_file():
            continue
        _copy_file(path, dest / path.relative_to(src))
        count += 1
    return count


def collect_outputs(config: EvalConfig, workspace_after: Path, case_dir: Path,
                    stop: threading.Event | None = None) -> dict[str, int]:
    """Copy each outputs[].path from the workspace into cases/<id>/<path>."""
    counts: dict[str, int] = {}
    for output in config.outputs:
        if not output.path:
            continue
        source = workspace_after / output.path
        if source.is_symlink():
            counts[output.path] = 0
        elif source.is_dir():
            counts[output.path] = _copy_dir_files(source, case_dir / output.path, stop, output.path)
        elif source.is_file():
            _copy_file(source, case_dir / output.path)
            counts[output.path] = 1
        else:
            counts[output.path] = 0
    return counts


def collect_changes(before: Path, after: Path, case_dir: Path, mounted: tuple[str, ...] = (),
                    stop: threading.Event | None = None) -> WorkspaceChanges:
    """`_modified/` copies of changed and added files, and `workspace.diff`.

    Once `stop` is set, raises CollectionInterrupted: the diff then ends in a note that it stopped."""
    changes = compare(before, after, mounted, stop)
    out = CaseDir(case_dir)
    changed = changes.changed
    for index, rel in enumerate(changed):
        check_stop(stop, f"after copying {index} of {len(changed)} changed files", changes)
        _copy_file(after / rel, out.modified / rel)
    # surrogateescape: a name that is not UTF-8 goes back to its own bytes, as git would show it.
    with open(out.workspace_diff, "w", encoding="utf-8", errors="surrogateescape") as diff:
        for chunk in diff_chunks(before, after, changes, stop=stop):
            diff.write(chunk)
    return changes


def collect_transcripts(projects_dir: Path, session_id: str | None, case_dir: Path,
                        stop: threading.Event | None = None) -> bool:
    """The session transcript as transcript.jsonl, other sessions' files under subagents/."""
    if not projects_dir.is_dir():
        return False
    found = False
    for path in sorted(projects_dir.rglob("*.jsonl")):
        check_stop(stop, "while copying the session transcripts")
        if path.is_symlink() or not path.is_file():
            continue
        if session_id and path.stem == session_id and not found:
            _copy_file(path, CaseDir(case_dir).transcript)
            found = True
        else:
            _copy_file(path, CaseDir(case_dir).subagents / path.name)
    if not found and not session_id:
        # No result event (e.g. a timeout): the newest main transcript is the session.
        candidates = sorted((p for p in projects_dir.glob("*/*.jsonl") if p.is_file()), key=lambda p: p.stat().st_mtime)
        if candidates:
            _copy_file(candidates[-1], CaseDir(case_dir).transcript)
            found = True
    return found
