"""`agent-eval-sandbox run`: a whole run, start to finish.

    plan (cli) → image → run directory → stage the project → before_all
      → every case through runner/case.py, `parallelism` at once (runner/schedule.py)
      → run_result.json → before_scoring → judges and reports (app/score.py)
      → with --baseline, the comparison (app/compare.py) → after_all

Ctrl-C or SIGTERM once the run directory exists removes the run's sandboxes
(sandbox/teardown.py); whatever had finished is recorded — run_result.json with
`interrupted: true`, `planned` and `finished`, an `interrupted` outcome for each
case that never finished — and judging is left to `score RUN_DIR`. The run then
exits 130/143.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from agent_eval_sandbox import __version__
from agent_eval_sandbox.app.agent_judging import JudgeSandboxes
from agent_eval_sandbox.app.compare import CompareResult, compare_runs
from agent_eval_sandbox.app.rerun import ResumePlan, fingerprint
from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.config.dataset import Dataset
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.host_env import clean_search_path
from agent_eval_sandbox.interception import ToolHandlers, compile_handlers, deny_filter
from agent_eval_sandbox.judges import epochs as epochs_of
from agent_eval_sandbox.lifecycle import HookRunner, Phase, RunInfo
from agent_eval_sandbox.lifecycle.outputs import HookOutputs, write_hook_outputs
from agent_eval_sandbox.report.build import ScoreResult, build_reports
from agent_eval_sandbox.rundir.latest import point_latest
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.models import CaseOutcome, RunResult
from agent_eval_sandbox.rundir.read import read_mapping
from agent_eval_sandbox.rundir.write import write_json, write_yaml
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.answer_key import answer_key, left_out_line
from agent_eval_sandbox.runner.case import INTERRUPTED
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.display import ProgressDisplay
from agent_eval_sandbox.runner.model_access import model_access
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.runner.repo_history import commit_snapshot, project_files
from agent_eval_sandbox.runner.schedule import Scheduled, run_cases
from agent_eval_sandbox.runner.workspace import (
    StagedResource,
    stage_project_resources,
    stage_repo_workspace,
)
from agent_eval_sandbox.sandbox.base import SandboxBackend
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION
from agent_eval_sandbox.sandbox.held_dirs import ABANDONED, sweep_abandoned
from agent_eval_sandbox.sandbox.host_paths import HostPaths
from agent_eval_sandbox.sandbox.image import (
    ImageSettings,
    SandboxImage,
    ensure_sandbox_image,
    exec_only_binaries,
)
from agent_eval_sandbox.sandbox.registry import backend_for
from agent_eval_sandbox.sandbox.teardown import run_scope

log = logging.getLogger(__name__)


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
    baseline: Path | None = None  # a judged run to compare this one with, once judged (app/compare.py)
    junit_fail_on_judge: bool = False
    exit_first: bool = False  # -x: no case starts after one that did not complete
    rerun_of: Path | None = None  # --rerun-failed: the run whose failures this one runs again
    resume: ResumePlan | None = None  # --resume: the interrupted run finished in place, and its kept cases
    epochs: int = 1  # --epochs: each case ran as <id>#1 … <id>#N; the judges are aggregated across them
    # Where the files the sandboxes mount go (--shared-dir); None: the backend chooses (sandbox/host_paths.py).
    shared_dir: Path | None = None
    # Kubernetes: run even where the cluster does not enforce the run's NetworkPolicy.
    allow_unenforced_network: bool = False


@dataclass
class RunOutcome:
    run_dir: RunDir
    result: RunResult
    statuses: list[CaseStatus] = field(default_factory=list)
    score: ScoreResult | None = None  # None when interrupted: the cases ran, judging did not
    interrupted_exit: int | None = None  # 130/143 when Ctrl-C/SIGTERM stopped the cases
    comparison: CompareResult | None = None  # with a baseline, once judged


# Makes the image the sandboxes run: (the `sandbox:` image settings, rebuild, console) -> the image.
ImageStep = Callable[[ImageSettings, bool, Console], SandboxImage]


def docker_image(settings: ImageSettings, rebuild: bool, console: Console) -> SandboxImage:
    """The Docker backend's image: a prebuilt `sandbox.image`, or built (base bootstrapped) when missing."""
    return ensure_sandbox_image(settings, rebuild=rebuild, bootstrap_missing_base=True, console=console)


def registry_image(settings: ImageSettings, rebuild: bool, console: Console) -> SandboxImage:
    """The Kubernetes backend's image: `sandbox.image` as the cluster pulls it (built and pushed beforehand)."""
    assert settings.image, "sandbox.image is required with backend kubernetes (checked at load)"
    return SandboxImage(ref=settings.image, built=False)


def execute_run(request: RunRequest, *, err_console: Console, show_progress: bool = True,
                backend: SandboxBackend | None = None, image_step: ImageStep | None = None) -> RunOutcome:
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
    backend, host = _backend(request, err_console, backend)
    if image_step is None:
        image_step = registry_image if config.sandbox.backend == "kubernetes" else docker_image
    # What happens before the first case can take minutes (a first image build): it is said as it starts.
    log.info("sandbox image: checking (Claude Code %s)%s", claude_version, ", rebuilding" if request.rebuild_image
             else "")
    image = image_step(
        ImageSettings(image=config.sandbox.image, base_image=config.sandbox.base_image, claude_version=claude_version,
                      exec_only=exec_only_binaries(config.sandbox.runtime)),
        request.rebuild_image, err_console,
    )
    log.info("sandbox image: %s (%s)", image.ref, "built now" if image.built else "ready")
    log.info("checking that the sandboxes can mount the run's files in %s", host.root)
    backend.check_host_paths(host, image.ref)
    started = time.time()
    run_dir = _open_run_dir(request, image.ref, claude_version, started)
    gateway = models.gateway(ac.gateway_policy(config, settings, environ))
    held_staging = host.temp_dir("aes-")
    staging = held_staging.path
    hooks = HookRunner(
        RunInfo(run_id=request.run_id, run_dir=run_dir.root, project_root=loaded.root, config_path=loaded.path,
                workspace_root=staging, model=settings.model or "", caller_env=environ),
        report=lambda result: err_console.print(result.console_line, highlight=False, markup=False),
    )
    statuses = [CaseStatus(inv.id) for inv in request.invocations]
    result: RunResult | None = None
    scheduled = Scheduled([])
    cancelled = threading.Event()  # set by Ctrl-C/SIGTERM before anything else: no case starts after it
    score: ScoreResult | None = None
    comparison: CompareResult | None = None
    try:
        # From here on Ctrl-C/SIGTERM removes the run's sandboxes and is recorded, whatever step it stops.
        with run_scope(backend, request.run_id, cancelled):
            log.info("staging the project for the sandboxes (without the answer key)")
            resources, repo_copy = _stage_project(request, staging, handlers, environ, warn)
            log.info("running %d case(s), %d at once; results in %s", len(request.invocations),
                     settings.parallelism, run_dir.root)
            with hooks.around_run(config.hooks) as before_all:
                ctx = RunContext(
                    loaded=loaded, settings=settings, run_dir=run_dir, run_id=request.run_id, backend=backend,
                    image_ref=image.ref, gateway=gateway, models=models, staging=staging, resources=resources,
                    host_environ=environ, warn=warn, hooks=hooks, handlers=handlers,
                    is_denied=deny_filter(config), global_hook_outputs=before_all.outputs, repo_copy=repo_copy,
                    cancelled=cancelled,
                )
                with ProgressDisplay(statuses, err_console, enabled=show_progress, run_dir=run_dir.root):
                    scheduled = run_cases(ctx, request.invocations, statuses, exit_first=request.exit_first)
                _write_hook_outputs(run_dir, before_all.outputs, [*_kept_ids(request), *request.invocations])
                result = _record(request, run_dir, scheduled, claude_version, started)
                if not scheduled.interrupted_by:
                    sandboxes = JudgeSandboxes(backend=backend, host=host, image_ref=image.ref, models=models,
                                               parallelism=settings.judge_sandboxes)
                    score, comparison = _score(request, run_dir, hooks, sandboxes, err_console)
    except (KeyboardInterrupt, SystemExit) as exc:
        if result is None:  # stopped before the cases were recorded (staging, before_all): record that
            _record(request, run_dir, Scheduled(scheduled.outcomes, exc), claude_version, started)
        raise
    finally:
        gateway.close()
        models.close()
        held_staging.release()
    return RunOutcome(run_dir=run_dir, result=result, statuses=statuses, score=score,
                      interrupted_exit=scheduled.exit_code, comparison=comparison)


def _record(request: RunRequest, run_dir: RunDir, scheduled: Scheduled, claude_version: str,
            started: float) -> RunResult:
    """run_result.json: the cases' outcomes; once interrupted, every planned case that has none
    gets an `interrupted` one, so the planned denominator stays."""
    kept = request.resume.kept if request.resume is not None else []
    outcomes = [*kept, *scheduled.outcomes]
    if scheduled.interrupted_by is not None:
        have = {case for o in outcomes for case in o.cases or [o.case_id]}
        outcomes += [CaseOutcome(case_id=inv.id, cases=[c.id for c in inv.cases], end_reason="interrupted",
                                 model=request.settings.model, error=INTERRUPTED)
                     for inv in request.invocations if not {c.id for c in inv.cases} <= have]
    result = RunResult.from_outcomes(
        outcomes, mode=request.loaded.config.execution.mode, model=request.settings.model,
        wall_clock_s=time.time() - started, agent_version=claude_version,
        planned=sum(len(o.cases or [o.case_id]) for o in kept) + sum(len(inv.cases) for inv in request.invocations),
        interrupted=scheduled.interrupted_by is not None,
    )
    write_json(run_dir.run_result, result.to_data())
    return result


def _open_run_dir(request: RunRequest, image: str, claude_version: str, started: float) -> RunDir:
    """A new run directory with its run.json, or (--resume) the interrupted one, its unfinished cases'
    leftovers removed; either way `latest` points at it from now on."""
    if request.resume is None:
        run_dir = RunDir.create(request.runs_base, request.loaded.config.name, request.run_id)
        write_json(run_dir.run_json, _run_meta(request, image, claude_version, started))
    else:
        run_dir = request.resume.run
        for inv in request.invocations:
            shutil.rmtree(run_dir.case(inv.id).path, ignore_errors=True)
        for stale in (run_dir.summary_yaml, run_dir.summary_json, run_dir.report_html, run_dir.junit_xml):
            stale.unlink(missing_ok=True)
        meta = dict(request.resume.meta)
        meta["resumed_at"] = [*meta.get("resumed_at", []), started]
        write_json(run_dir.run_json, meta)
    point_latest(run_dir)
    return run_dir


def _kept_ids(request: RunRequest) -> list[str]:
    return [o.case_id for o in request.resume.kept] if request.resume is not None else []


def _warner(err_console: Console) -> Callable[[str], None]:
    def warn(message: str) -> None:
        err_console.print(f"warning: {message}", highlight=False, markup=False)

    return warn


def _backend(request: RunRequest, err_console: Console,
             given: SandboxBackend | None) -> tuple[SandboxBackend, HostPaths]:
    """The sandbox backend, with the orphans of dead runs reaped and the runtime checked, and where the
    files its sandboxes mount go (decided first: a daemon that cannot be used is refused before use)."""
    sandbox = request.loaded.config.sandbox
    backend = given if given is not None else backend_for(
        sandbox, allow_unenforced_network=request.allow_unenforced_network, warn=_warner(err_console))
    log.debug("sandbox backend: %s%s", request.loaded.config.sandbox.backend,
             f", runtime {sandbox.runtime}" if sandbox.runtime else "")
    host = backend.host_paths(request.shared_dir, request.runs_base)
    for removed in backend.reap_orphans():
        err_console.print(f"removed orphaned {removed.kind} {removed.name} ({removed.reason})", highlight=False)
    for path in sweep_abandoned([host.base, Path(tempfile.gettempdir())]):
        err_console.print(f"removed abandoned directory {path} ({ABANDONED})", highlight=False)
    if sandbox.runtime:
        backend.check_runtime(sandbox.runtime)
    backend.prepare_run(request.run_id)
    return backend, host


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
        "rerun_of": str(request.rerun_of.resolve()) if request.rerun_of is not None else None,
        "fingerprint": fingerprint(request.loaded),
        "epochs": request.epochs,
        "image": image,
        "claude_version": claude_version,
        "mode": config.execution.mode,
        "settings": {
            "timeout_s": settings.timeout_s,
            "max_budget_usd": settings.max_budget_usd,
            "parallelism": settings.parallelism,
            "model": settings.model,
            "subagent_model": settings.subagent_model,
            # what --skill-args replaced the eval's template with; a resume passes it again
            "skill_args": settings.template if settings.template_source == "--skill-args" else None,
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


def _write_hook_outputs(run_dir: RunDir, before_all: HookOutputs, invocations: list[Invocation | str]) -> None:
    """`hook_outputs.yaml`: before_all's data, and each case's from its before_each hooks."""
    cases = {}
    for inv in invocations:
        case_id = inv if isinstance(inv, str) else inv.id
        data, _ = read_mapping(run_dir.case(case_id).hook_outputs)
        if data:
            cases[case_id] = data
    write_hook_outputs(run_dir.hook_outputs, {"before_all": dict(before_all.data), "cases": cases})


def _score(request: RunRequest, run_dir: RunDir, hooks: HookRunner, sandboxes: JudgeSandboxes,
           err_console: Console) -> tuple[ScoreResult, CompareResult | None]:
    """before_scoring hooks, the judges (agent judges in the run's backend, on its image and models), the
    comparison with the baseline, before_report hooks, the reports."""
    config = request.loaded.config
    models = sandboxes.models
    assert models is not None

    def echo(line: str) -> None:
        err_console.print(line, highlight=False, markup=False)

    hooks.run(Phase.BEFORE_SCORING, config.hooks.before_scoring)
    with models.judge_endpoint() as endpoint:
        score = score_run(run_dir.root, request.loaded.path, endpoint=endpoint, parallelism=models.judge_parallelism,
                          offline=models.offline, sandboxes=sandboxes, echo=echo,
                          junit_fail_on_judge=request.junit_fail_on_judge)
    comparison = None
    if request.baseline is not None:
        comparison = compare_runs(run_dir.root, request.baseline, config_path=request.loaded.path,
                                  endpoint=lambda _loaded: models.pairwise_endpoint(),
                                  parallelism=models.judge_parallelism, echo=echo,
                                  junit_fail_on_judge=request.junit_fail_on_judge)
        score = comparison.score
    if config.hooks.before_report:
        hooks.run_safe(Phase.BEFORE_REPORT, config.hooks.before_report)
        score = build_reports(run_dir.root, junit_fail_on_judge=request.junit_fail_on_judge)
    if request.epochs > 1:
        _aggregate_epochs(run_dir, request.epochs, err_console)
    if config.mlflow is not None:
        from agent_eval_sandbox.report.mlflow_log import log_run, tracking_uri

        log.info("logging the run to MLflow at %s", tracking_uri(config.mlflow, os.environ))
        logged = log_run(run_dir, config.mlflow, eval_name=config.name, environ=os.environ, warn=_warner(err_console))
        if logged:
            log.info("MLflow run %s", logged)
    return score, comparison


def _aggregate_epochs(run_dir: RunDir, epochs: int, err_console: Console) -> None:
    """epochs.yaml: every judge across each case's epochs (mean, pass@k, pass^k); a line per judge."""
    summary, _ = read_mapping(run_dir.summary_yaml)
    per_case = summary.get("per_case") if isinstance(summary.get("per_case"), dict) else {}
    aggregated = epochs_of.aggregate(per_case or {}, epochs)
    write_yaml(run_dir.epochs_yaml, {"epochs": epochs, "per_case": aggregated})
    err_console.print(f"across {epochs} epochs (epochs.yaml):", highlight=False, markup=False)
    for line in epochs_of.judge_lines(aggregated, epochs):
        err_console.print(line, highlight=False, markup=False)

