"""`agent-eval-sandbox run`: a whole run, start to finish.

    plan (cli) → image → run directory → stage the project → before_all
      → every case through runner/case.py, `parallelism` at once (runner/schedule.py)
      → run_result.json → before_scoring → judges and reports (app/score.py) → after_all
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from agent_eval_sandbox import __version__
from agent_eval_sandbox.app.agent_judging import JudgeSandboxes
from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.config.dataset import Dataset
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.host_env import clean_search_path
from agent_eval_sandbox.interception import ToolHandlers, compile_handlers, deny_filter
from agent_eval_sandbox.lifecycle import HookRunner, Phase, RunInfo
from agent_eval_sandbox.lifecycle.outputs import HookOutputs, write_hook_outputs
from agent_eval_sandbox.report.build import ScoreResult, build_reports
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.models import RunResult
from agent_eval_sandbox.rundir.read import read_mapping
from agent_eval_sandbox.rundir.write import write_json
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.answer_key import answer_key, left_out_line
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.display import ProgressDisplay
from agent_eval_sandbox.runner.model_access import model_access
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.runner.repo_history import commit_snapshot, project_files
from agent_eval_sandbox.runner.schedule import run_cases
from agent_eval_sandbox.runner.workspace import (
    StagedResource,
    stage_project_resources,
    stage_repo_workspace,
)
from agent_eval_sandbox.sandbox.base import SandboxBackend
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION
from agent_eval_sandbox.sandbox.image import (
    ImageSettings,
    SandboxImage,
    ensure_sandbox_image,
    exec_only_binaries,
)
from agent_eval_sandbox.sandbox.registry import get_backend
from agent_eval_sandbox.sandbox.teardown import run_scope


@dataclass
class RunRequest:
    loaded: LoadedConfig
    dataset: Dataset
    settings: RunSettings
    invocations: list[Invocation]
    runs_base: Path
    run_id: str
    offline: bool
    claude_version: str | None = None
    rebuild_image: bool = False
    record: bool = False  # each case's gateway channel writes its cassette
    replay: Path | None = None  # a recorded run whose cassettes play the agent's model


@dataclass
class RunOutcome:
    run_dir: RunDir
    result: RunResult
    statuses: list[CaseStatus] = field(default_factory=list)
    score: ScoreResult | None = None


# Makes the image the sandboxes run: (the `sandbox:` image settings, rebuild, console) -> the image.
ImageStep = Callable[[ImageSettings, bool, Console], SandboxImage]


def docker_image(settings: ImageSettings, rebuild: bool, console: Console) -> SandboxImage:
    """The Docker backend's image: a prebuilt `sandbox.image`, or built (base bootstrapped) when missing."""
    return ensure_sandbox_image(settings, rebuild=rebuild, bootstrap_missing_base=True, console=console)


def execute_run(request: RunRequest, *, err_console: Console, show_progress: bool = True,
                backend: SandboxBackend | None = None, image_step: ImageStep = docker_image) -> RunOutcome:
    """`backend`: the sandboxes' backend (default: `sandbox.backend` by name); `image_step` readies
    their image. Both are given together for a backend that is not Docker (tests use the fake one)."""
    loaded, config, settings = request.loaded, request.loaded.config, request.settings
    environ = dict(os.environ)
    warn = _warner(err_console)
    claude_version = request.claude_version or config.sandbox.claude_version or DEFAULT_CLAUDE_VERSION
    models = model_access(loaded, offline=request.offline, environ=environ, record=request.record,
                          replay=request.replay, settings=settings, claude_version=claude_version)
    for warning in models.warnings(request.invocations):
        warn(warning)
    handlers = compile_handlers(loaded)
    for key in ac.workspace_env(config, environ)[1]:
        warn(f"execution.env.{key} is ignored: credentials and the model endpoint stay on the host")
    backend = _backend(request, err_console, backend)
    image = image_step(
        ImageSettings(image=config.sandbox.image, base_image=config.sandbox.base_image, claude_version=claude_version,
                      exec_only=exec_only_binaries(config.sandbox.runtime)),
        request.rebuild_image, err_console,
    )
    run_dir = RunDir.create(request.runs_base, config.name, request.run_id)
    started = time.time()
    write_json(run_dir.run_json, _run_meta(request, image.ref, claude_version, started))
    gateway = models.gateway(ac.gateway_policy(config, settings, environ))
    staging = Path(tempfile.mkdtemp(prefix="aes-"))
    hooks = HookRunner(
        RunInfo(run_id=request.run_id, run_dir=run_dir.root, project_root=loaded.root, config_path=loaded.path,
                workspace_root=staging, model=settings.model or "", caller_env=environ),
        report=lambda result: err_console.print(result.console_line, highlight=False, markup=False),
    )
    statuses = [CaseStatus(inv.id) for inv in request.invocations]
    try:
        resources, repo_copy = _stage_project(request, staging, handlers, environ, warn)
        with hooks.around_run(config.hooks) as before_all:
            ctx = RunContext(
                loaded=loaded, settings=settings, run_dir=run_dir, run_id=request.run_id, backend=backend,
                image_ref=image.ref, gateway=gateway, models=models, staging=staging, resources=resources,
                host_environ=environ, warn=warn, hooks=hooks, handlers=handlers, is_denied=deny_filter(config),
                global_hook_outputs=before_all.outputs, repo_copy=repo_copy,
            )
            with run_scope(backend, request.run_id), ProgressDisplay(statuses, err_console, enabled=show_progress):
                outcomes = run_cases(ctx, request.invocations, statuses)
            _write_hook_outputs(run_dir, before_all.outputs, request.invocations)
            result = RunResult.from_outcomes(outcomes, mode=config.execution.mode, model=settings.model,
                                             wall_clock_s=time.time() - started, agent_version=claude_version)
            write_json(run_dir.run_result, result.to_data())
            sandboxes = JudgeSandboxes(backend=backend, image_ref=image.ref, models=models,
                                       parallelism=settings.judge_sandboxes)
            score = _score(request, run_dir, hooks, sandboxes, err_console)
    finally:
        gateway.close()
        models.close()
        shutil.rmtree(staging, ignore_errors=True)
    return RunOutcome(run_dir=run_dir, result=result, statuses=statuses, score=score)


def _warner(err_console: Console) -> Callable[[str], None]:
    def warn(message: str) -> None:
        err_console.print(f"warning: {message}", highlight=False, markup=False)

    return warn


def _backend(request: RunRequest, err_console: Console, given: SandboxBackend | None) -> SandboxBackend:
    """The sandbox backend, with the orphans of dead runs reaped and the runtime checked."""
    sandbox = request.loaded.config.sandbox
    backend = given if given is not None else get_backend(sandbox.backend)
    for removed in backend.reap_orphans():
        err_console.print(f"removed orphaned {removed.kind} {removed.name} ({removed.reason})", highlight=False)
    if sandbox.runtime:
        backend.check_runtime(sandbox.runtime)
    return backend


def _run_meta(request: RunRequest, image: str, claude_version: str, started: float) -> dict[str, object]:
    """run.json: what ran, with what, from where."""
    config, settings = request.loaded.config, request.settings
    return {
        "tool": "agent-eval-sandbox",
        "version": __version__,
        "eval": config.name,
        "config_path": str(request.loaded.path),
        "project_root": str(request.loaded.root),
        "run_id": request.run_id,
        "offline": request.offline,
        "recorded": request.record,
        "replay_of": str(request.replay.resolve()) if request.replay is not None else None,
        "image": image,
        "claude_version": claude_version,
        "mode": config.execution.mode,
        "settings": {
            "timeout_s": settings.timeout_s,
            "max_budget_usd": settings.max_budget_usd,
            "parallelism": settings.parallelism,
            "model": settings.model,
        },
        "started_at": started,
    }


def _stage_project(request: RunRequest, staging: Path, handlers: ToolHandlers | None, environ: Mapping[str, str],
                   warn: Callable[[str], None]) -> tuple[tuple[StagedResource, ...], Path | None]:
    """The read-only project resources every case mounts, or (repo mode) the project copy each case
    starts from — both without the answer key."""
    loaded, config = request.loaded, request.loaded.config
    is_denied = deny_filter(config)
    key = answer_key(loaded, runs_base=request.runs_base, handlers=handlers)
    resources: tuple[StagedResource, ...] = ()
    repo_copy = None
    if config.is_repo_mode:
        repo_copy = staging / "repo"
        path_var = clean_search_path(environ.get("PATH", ""), []) or os.defpath
        report = stage_repo_workspace(loaded.root, repo_copy, exclude=key, is_denied=is_denied,
                                      only=project_files(loaded.root, path_var=path_var))
        note = commit_snapshot(repo_copy, path_var=path_var)
        if note:
            warn(note)
    else:
        staged = stage_project_resources(config, loaded.paths, staging / "project", is_denied=is_denied, exclude=key)
        resources, report = tuple(staged.resources), staged.report
    left_out = left_out_line(key, report.excluded, loaded.root)
    if left_out:
        warn(left_out)
    return resources, repo_copy


def _write_hook_outputs(run_dir: RunDir, before_all: HookOutputs, invocations: list[Invocation]) -> None:
    """`hook_outputs.yaml`: before_all's data, and each case's from its before_each hooks."""
    cases = {}
    for inv in invocations:
        data, _ = read_mapping(run_dir.case(inv.id).hook_outputs)
        if data:
            cases[inv.id] = data
    write_hook_outputs(run_dir.hook_outputs, {"before_all": dict(before_all.data), "cases": cases})


def _score(request: RunRequest, run_dir: RunDir, hooks: HookRunner, sandboxes: JudgeSandboxes,
           err_console: Console) -> ScoreResult:
    """before_scoring hooks, the judges (agent judges in the run's backend, on its image and models),
    before_report hooks, the reports."""
    config = request.loaded.config
    models = sandboxes.models
    assert models is not None
    hooks.run(Phase.BEFORE_SCORING, config.hooks.before_scoring)
    with models.judge_endpoint() as endpoint:
        score = score_run(run_dir.root, request.loaded.path, endpoint=endpoint, parallelism=models.judge_parallelism,
                          offline=models.offline, sandboxes=sandboxes,
                          echo=lambda line: err_console.print(line, highlight=False, markup=False))
    if config.hooks.before_report:
        hooks.run_safe(Phase.BEFORE_REPORT, config.hooks.before_report)
        score = build_reports(run_dir.root)
    return score

