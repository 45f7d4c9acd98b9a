"""Agent judges on a finished run: every planned sample in a sandbox of its own, `parallelism` at once.

`score_run` (app/score.py) plans each case's agent judge samples while it
judges the case (`plan_case`), then runs them all here, after every other
judge, and reduces each case's samples (`AgentJudge.conclude`). A case whose
agent never ran is never planned: no sandbox starts, no money is spent on it.
`run` lends its sandbox backend, image and models (`JudgeSandboxes`); `score
RUN_DIR` makes its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.judges.agent import AgentJudgeJob, AgentRunOutput
from agent_eval_sandbox.judges.kinds import AgentJudge, Outcome
from agent_eval_sandbox.judges.results import CaseResult
from agent_eval_sandbox.rundir.read import FinishedRun
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.judge_agent import JudgeAgentHost, run_judge_agent
from agent_eval_sandbox.runner.model_access import ModelAccess, model_access
from agent_eval_sandbox.sandbox.base import SandboxBackend
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION
from agent_eval_sandbox.sandbox.host_paths import HostPaths
from agent_eval_sandbox.sandbox.image import ImageSettings, ensure_sandbox_image, exec_only_binaries
from agent_eval_sandbox.sandbox.registry import backend_for
from agent_eval_sandbox.sandbox.teardown import run_scope

Planned = list[tuple[str, AgentJudge, list[AgentJudgeJob]]]  # (case id, judge, its samples)


@dataclass(frozen=True)
class JudgeSandboxes:
    """What agent judges run with: a run lends its own; anything left None is made for the scoring."""

    backend: SandboxBackend | None = None
    host: HostPaths | None = None  # where the backend's sandboxes mount files from (the run's)
    image_ref: str | None = None
    models: ModelAccess | None = None  # None: online, or offline with `score --offline`
    parallelism: int = 1  # sandboxes at once


def plan_case(judges: Sequence[AgentJudge], record: dict[str, Any], case_id: str, case_dir: Path
              ) -> tuple[dict[str, CaseResult], Planned]:
    """One case's agent judges: the results settled without a sandbox (a false `if`, a broken judge, a
    prompt that does not render), and the samples to run. Only for a case whose agent ran: `score_run`
    settles the others (judges/standing.py) before anything is planned."""
    settled: dict[str, CaseResult] = {}
    planned: Planned = []
    for judge in judges:
        plan = judge.precheck(record) or judge.jobs(record, case_id, case_dir)
        if isinstance(plan, list):
            planned.append((case_id, judge, plan))
        else:
            settled[judge.name] = plan[0]
    return settled, planned


@contextmanager
def judge_agent_host(loaded: LoadedConfig, run: FinishedRun, lent: JudgeSandboxes, *, offline: bool,
                     environ: Mapping[str, str] | None = None) -> Iterator[JudgeAgentHost]:
    """The sandboxes, gateway and models of one scoring's agent judges; all of it released on exit,
    every judge sandbox of the run removed (also on Ctrl-C, as for cases)."""
    config = loaded.config
    host_environ = dict(os.environ if environ is None else environ)
    with ExitStack() as stack:
        backend, host = lent.backend, lent.host
        if backend is None or host is None:
            backend = backend_for(config.sandbox, warn=lambda line: Console(stderr=True).print(line, markup=False))
            # <runs base>/<eval>/<run id>: the mounted files go where a run of that runs base puts them.
            host = backend.host_paths(None, run.root.parent.parent)
            if config.sandbox.runtime:
                backend.check_runtime(config.sandbox.runtime)
            backend.prepare_run(run.run_id)
        image_ref = lent.image_ref or _image(loaded, run)
        models = lent.models
        if models is None:
            models = model_access(loaded, offline=offline, environ=host_environ)
            stack.callback(models.close)
        gateway = models.gateway(ac.judge_gateway_policy(config, host_environ))
        stack.callback(gateway.close)
        held_staging = host.temp_dir("aesj-")  # bind-mount sources: where the daemon sees them
        stack.callback(held_staging.release)
        staging = held_staging.path
        cancelled = threading.Event()  # set on Ctrl-C/SIGTERM before the removal: no sample starts after it
        stack.enter_context(run_scope(backend, run.run_id, cancelled))
        yield JudgeAgentHost(loaded=loaded, run_dir=run.dir, run_id=run.run_id, backend=backend, image_ref=image_ref,
                             gateway=gateway, models=models, staging=staging, host_environ=host_environ,
                             cancelled=cancelled)


def _image(loaded: LoadedConfig, run: FinishedRun) -> str:
    """The sandbox image the run's cases used: on Kubernetes the one run.json names (it is in a
    registry), on Docker the same build (built again if it is gone)."""
    sandbox = loaded.config.sandbox
    recorded_image = run.meta.get("image")
    if sandbox.backend == "kubernetes" and isinstance(recorded_image, str) and recorded_image:
        return recorded_image
    recorded = run.meta.get("claude_version")
    version = recorded if isinstance(recorded, str) and recorded else sandbox.claude_version or DEFAULT_CLAUDE_VERSION
    settings = ImageSettings(image=sandbox.image, base_image=sandbox.base_image, claude_version=version,
                             exec_only=exec_only_binaries(sandbox.runtime))
    return ensure_sandbox_image(settings, bootstrap_missing_base=True, console=Console(stderr=True)).ref


def run_agent_jobs(host: JudgeAgentHost, jobs: Sequence[AgentJudgeJob], parallelism: int
                   ) -> dict[tuple[str, str], list[AgentRunOutput]]:
    """Every job, `parallelism` at once: {(case id, judge): [its samples' outputs, in sample order]}."""
    outputs: dict[tuple[str, str], list[AgentRunOutput]] = {}
    executor = ThreadPoolExecutor(max_workers=max(1, parallelism), thread_name_prefix="agent-judge")
    try:
        futures = [(job, executor.submit(run_judge_agent, host, job)) for job in jobs]
        for job, future in futures:
            outputs.setdefault((job.case_id, job.judge), []).append(future.result())
    except BaseException:
        host.cancelled.set()  # what has not started does not start; run_scope removes what runs
        raise
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    return outputs


def judge_planned(planned: Planned, loaded: LoadedConfig, run: FinishedRun, lent: JudgeSandboxes, *, offline: bool,
                  say: Callable[[str], None]) -> dict[tuple[str, str], Outcome]:
    """Run every planned sample and reduce each case's: {(case id, judge): its outcome}."""
    jobs = [job for _, _, case_jobs in planned for job in case_jobs]
    say(f"Running {len(jobs)} agent judge sample(s), each in its own sandbox, {max(1, lent.parallelism)} at once")
    with judge_agent_host(loaded, run, lent, offline=offline) as host:
        outputs = run_agent_jobs(host, jobs, lent.parallelism)
    return {(case_id, judge.name): judge.conclude(outputs[(case_id, judge.name)]) for case_id, judge, _ in planned}
