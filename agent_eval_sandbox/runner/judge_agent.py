"""One sample of an agent judge, in a sandbox of its own (the judging side is judges/agent.py).

    output = run_judge_agent(host, job)

The judge's sandbox is made as a case's is: the same image and backend, the
same hardening and limits (`sandbox:`), no network, its model reached only
through a gateway channel of its own (the judge's budget, its own request
log), its stream checked against that channel's record. What it gets, staged
on the host and bind-mounted read-only: the case's collected files that
`agent.inputs` selects (copied from the case's directory in the run, regular
files only) and `agent.context` (copied from the project, offline scripts
left out); plus an empty, writable ./output/. Nothing else of the case or the
project reaches it — not the dataset, not the answer key, not the API key.
Its tools are not intercepted (no hook broker): `inputs.tools` shape the
skill's environment, not the judge's, and whatever the judge runs stays in
its sandbox. What it leaves is under cases/<id>/_judges/<judge>/<sample>/.
Never raises: what goes wrong is the sample's `failure`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.gateway import Channel, ModelGateway
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.judges.agent import (
    CONTEXT_DIR,
    MAX_SCORE_FILE_BYTES,
    OUTPUT_DIR,
    SCORE_FILE,
    AgentJudgeJob,
    AgentRunOutput,
    context_names,
    staged_path,
)
from agent_eval_sandbox.rundir.layout import JudgeRunDir, RunDir
from agent_eval_sandbox.rundir.write import write_json
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.answer_key import OFFLINE_SCRIPT_NAMES
from agent_eval_sandbox.runner.collect import read_agent_stream
from agent_eval_sandbox.runner.ending import end_reason_of
from agent_eval_sandbox.runner.integrity import StreamVerifier
from agent_eval_sandbox.runner.model_access import JudgeScriptMissing, ModelAccess
from agent_eval_sandbox.runner.workspace import ALWAYS_SKIPPED, copy_tree
from agent_eval_sandbox.sandbox.archive import CopyOutReport
from agent_eval_sandbox.sandbox.base import BindMount, ExecResult, Sandbox, SandboxBackend, SandboxError
from agent_eval_sandbox.sandbox.policy import sandbox_spec

# What comes back of the judge's ./output/ (score.json, and whatever else it wrote there, for the record).
OUTPUT_MAX_BYTES = 16 * 1024 * 1024
OUTPUT_MAX_FILES = 1000
# The sandbox's label: the case's id, marked as its judge's.
JUDGE_SANDBOX_SUFFIX = ".judge"


@dataclass(frozen=True)
class JudgeAgentHost:
    """What every agent judge sample of one scoring shares."""

    loaded: LoadedConfig
    run_dir: RunDir
    run_id: str
    backend: SandboxBackend
    image_ref: str
    gateway: ModelGateway  # its policy allows the judges' models (agent_command.judge_gateway_policy)
    models: ModelAccess
    staging: Path  # short: gateway sockets live under it (~100 bytes per socket path)
    host_environ: Mapping[str, str]
    # Set on Ctrl-C/SIGTERM: samples not started yet must not start.
    cancelled: threading.Event = field(default_factory=threading.Event)
    _slots: itertools.count[int] = field(default_factory=itertools.count)

    def slot(self) -> Path:
        return self.staging / f"j{next(self._slots)}"


def run_judge_agent(host: JudgeAgentHost, job: AgentJudgeJob) -> AgentRunOutput:
    """Run one sample; its record goes to cases/<id>/_judges/<judge>/<sample>/. Never raises."""
    out = host.run_dir.case(job.case_id).judge_run(job.judge, job.sample)
    record: dict[str, Any] = {"judge": job.judge, "case_id": job.case_id, "sample": job.sample,
                              "samples": job.samples, "model": job.model, "timeout_s": job.timeout_s,
                              "max_budget_usd": job.budget_usd, "allowed_tools": list(job.allowed_tools)}
    started = time.monotonic()
    try:
        if out.path.exists():  # `score` judges a run again: the earlier record goes
            shutil.rmtree(out.path)
        out.path.mkdir(parents=True)
        output = _run(host, job, out, record)
    except Exception as exc:  # a bug of ours, a full disk: this sample's error, never the run's
        output = AgentRunOutput(failure=f"the judge's run failed: {type(exc).__name__}: {exc}")
    record.update(duration_s=round(time.monotonic() - started, 3), cost_usd=round(output.cost_usd, 6),
                  wrote_score_file=output.score_file is not None, failure=output.failure)
    with contextlib.suppress(OSError):
        write_json(out.result, record)
    return output


def _run(host: JudgeAgentHost, job: AgentJudgeJob, out: JudgeRunDir, record: dict[str, Any]) -> AgentRunOutput:
    if host.cancelled.is_set():
        return AgentRunOutput(failure="the scoring was interrupted before this judge ran")
    slot = host.slot()
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, slot, True)
        try:
            upstream = stack.enter_context(host.models.judge_agent_upstream(job.case_id, job.judge, job.sample))
        except JudgeScriptMissing as exc:
            return AgentRunOutput(failure=exc.render())
        mounts = stage(slot, job)
        out.prompt.write_text(job.prompt, encoding="utf-8")
        channel = host.gateway.open_channel(f"{job.case_id}/{job.judge}/{job.sample}",
                                            slot / "run" / paths.GATEWAY_SOCKET_NAME, job.budget_usd,
                                            out.gateway_log, upstream_url=upstream)
        stack.callback(channel.close)
        result, error, score = _sandboxed(host, job, out, slot, mounts)
        channel.close()  # every request is over: its record is whole
        return _conclude(job, out, channel, result, error, score, record)


def stage(slot: Path, job: AgentJudgeJob) -> list[BindMount]:
    """The judge's host side: the prompt and socket directory, managed settings, its read-only inputs
    and context, and a workspace holding only an empty output/. Returns the sandbox's mounts."""
    run, inputs, context, workspace = slot / "run", slot / "inputs", slot / "context", slot / "workspace"
    run.mkdir(parents=True, mode=0o755)
    run.chmod(0o755)  # the sandbox user reaches the socket through it
    (run / paths.PROMPT_FILE_NAME).write_text(job.prompt, encoding="utf-8")
    (workspace / OUTPUT_DIR).mkdir(parents=True)
    managed = slot / "managed-settings.json"
    managed.write_text(json.dumps({"permissions": {"allow": list(job.allowed_tools)}}, indent=2))
    managed.chmod(0o644)
    mounts = [BindMount(run, paths.RUN_DIR), BindMount(managed, paths.MANAGED_SETTINGS)]
    inputs.mkdir()
    case_root = job.case_dir.resolve()
    for relative in job.inputs:
        source = job.case_dir / relative
        # The record's own layout has no links; a path that leaves the case through one stages nothing.
        if not source.exists() or source.is_symlink() or case_root not in source.resolve().parents:
            continue
        copy_tree(source, inputs / staged_path(relative), skip_names=ALWAYS_SKIPPED)
    mounts += [BindMount(entry, f"{paths.WORKSPACE}/{entry.name}") for entry in sorted(inputs.iterdir())]
    if job.context:
        context.mkdir()
        for name, source in zip(context_names(job.context), job.context, strict=True):
            copy_tree(source, context / name, skip_names=ALWAYS_SKIPPED | OFFLINE_SCRIPT_NAMES)
        mounts.append(BindMount(context, f"{paths.WORKSPACE}/{CONTEXT_DIR}"))
    return mounts


def _sandboxed(host: JudgeAgentHost, job: AgentJudgeJob, out: JudgeRunDir, slot: Path, mounts: list[BindMount]
               ) -> tuple[ExecResult | None, str | None, tuple[bytes | None, str | None]]:
    """Create the sandbox, run the judge's `claude -p`, bring back its output/; always destroy it."""
    sandbox: Sandbox | None = None
    result: ExecResult | None = None
    score: tuple[bytes | None, str | None] = (None, None)
    try:
        spec = sandbox_spec(host.loaded.config.sandbox, image=host.image_ref, run_id=host.run_id,
                            case_id=job.case_id + JUDGE_SANDBOX_SUFFIX, timeout_s=job.timeout_s, now=time.time(),
                            mounts=mounts)
        sandbox = host.backend.create(spec)
        sandbox.copy_in(slot / "workspace", paths.WORKSPACE)
        argv = ac.launcher_argv(ac.judge_claude_argv(job.runner, model=job.model, budget_usd=job.budget_usd,
                                                     allowed_tools=list(job.allowed_tools)))
        env = ac.judge_agent_environment(job.runner, host_environ=host.host_environ)
        with open(out.stdout_log, "wb") as stdout, open(out.stderr_log, "wb") as stderr:
            result = sandbox.exec(argv, env=env.env, cwd=paths.WORKSPACE, stdout=stdout, stderr=stderr,
                                  timeout=job.timeout_s, on_timeout="freeze")
        score = _bring_back_output(sandbox, slot / "after", out.output)
        return result, None, score
    except (SandboxError, UserError) as exc:
        return result, str(exc), score
    finally:
        if sandbox is not None:
            sandbox.destroy()


def _bring_back_output(sandbox: Sandbox, after: Path, kept: Path) -> tuple[bytes | None, str | None]:
    """The judge's output/ into the record; (score.json's bytes or None, why it cannot be read or None)."""
    report: CopyOutReport = sandbox.copy_out(f"{paths.WORKSPACE}/{OUTPUT_DIR}", after, max_bytes=OUTPUT_MAX_BYTES,
                                             max_files=OUTPUT_MAX_FILES)
    if report.found:
        copy_tree(after, kept)
    score = after / SCORE_FILE
    if score.is_symlink() or (score.exists() and not score.is_file()):
        return None, f"the judge's {OUTPUT_DIR}/{SCORE_FILE} is not a regular file"
    if not score.exists():
        return None, None
    if score.stat().st_size > MAX_SCORE_FILE_BYTES:
        return None, f"the judge's {OUTPUT_DIR}/{SCORE_FILE} is larger than {MAX_SCORE_FILE_BYTES} bytes"
    return score.read_bytes(), None


def _conclude(job: AgentJudgeJob, out: JudgeRunDir, channel: Channel, result: ExecResult | None,
              error: str | None, score: tuple[bytes | None, str | None], record: dict[str, Any]) -> AgentRunOutput:
    """The sample's output: its verdict material, and why it does not count when the run did not finish."""
    verifier = StreamVerifier(channel.conversation.snapshot())
    events, summary = read_agent_stream(out.stdout_log, out.events, verifier)
    texts = [e["text"] for e in events if e.get("type") == "assistant" and not e.get("parent_tool_use_id")
             and e.get("text")]
    if summary.result_text:
        texts.append(summary.result_text)
    end = end_reason_of(result, refused=channel.refused, cli_budget_stop=summary.budget_exhausted, hook_failed=False)
    cost = max(channel.spent_usd, summary.cost_usd or 0.0)
    record.update(end_reason=end if error is None else "error", exit_code=result.exit_code if result else None,
                  error=error, gateway={"requests": channel.requests, "refused": channel.refused,
                                        "spent_usd": round(channel.spent_usd, 6)},
                  integrity={"checked": verifier.checked, "dropped": verifier.dropped,
                             "unverified": verifier.unverified,
                             "findings": [f.as_dict() for f in verifier.findings[:20]]})
    failure = f"the judge's sandbox failed: {error}" if error is not None else _unfinished(end, job, channel.refused)
    return AgentRunOutput(score_file=score[0], score_file_problem=score[1], answer_texts=tuple(texts),
                          failure=failure, cost_usd=cost)


def _unfinished(end: str, job: AgentJudgeJob, refused: int) -> str | None:
    """Why a judge run that did not end by itself yields no verdict, whatever it wrote (None: it did)."""
    if end == "exited":
        return None
    if end == "timed_out":
        return (f"the judge's agent was still running at its timeout of {job.timeout_s:g}s (agent.timeout): "
                "a verdict of an unfinished run does not count")
    if end == "budget_exhausted":
        how = f"the gateway refused {refused} request(s)" if refused else "the CLI stopped at its budget"
        return (f"the judge's agent reached its budget of ${job.budget_usd:g} (agent.max_budget_usd; {how}): "
                "a verdict of an unfinished run does not count")
    if end == "error":
        return "the judge's agent could not be started in its sandbox (see its stderr.log)"
    return f"the judge's agent did not finish: {end.replace('_', ' ')}"
