"""A whole run: plan, image, gateway, the scheduler over invocations, run_result.json."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from agent_eval_sandbox import __version__
from agent_eval_sandbox.config.dataset import MODEL_SCRIPT_NAME, Dataset
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.config.yaml_reader import read_yaml_mapping
from agent_eval_sandbox.gateway.credentials import Credentials, upstream_url_from_env
from agent_eval_sandbox.gateway.gateway import ModelGateway
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import Advance, load_script, parse_script
from agent_eval_sandbox.hooks.interception import (
    AnthropicAnswerer,
    compile_handlers,
    deny_filter,
)
from agent_eval_sandbox.hooks.lifecycle import HookRunner, Phase, RunInfo
from agent_eval_sandbox.hooks.outputs import write_run_hook_outputs
from agent_eval_sandbox.host_env import clean_search_path
from agent_eval_sandbox.judges.llm import JudgeEndpoint
from agent_eval_sandbox.judges.scoring import (
    DEFAULT_PARALLELISM as DEFAULT_JUDGE_PARALLELISM,
)
from agent_eval_sandbox.judges.scoring import score_run
from agent_eval_sandbox.report.build import ScoreResult, build_reports
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.answer_key import JUDGE_SCRIPT_NAME, answer_key, left_out_line
from agent_eval_sandbox.runner.display import ProgressDisplay
from agent_eval_sandbox.runner.invocation import (
    CaseStatus,
    RunContext,
    execute_invocation,
    offline_script_path,
)
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.runner.repo_history import commit_snapshot
from agent_eval_sandbox.runner.rundir import RunDir, write_json
from agent_eval_sandbox.runner.workspace import (
    stage_project_resources,
    stage_repo_workspace,
)
from agent_eval_sandbox.sandbox.base import SandboxBackend
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION
from agent_eval_sandbox.sandbox.image import ImageSettings, ensure_sandbox_image, exec_only_binaries
from agent_eval_sandbox.sandbox.registry import get_backend
from agent_eval_sandbox.sandbox.teardown import run_scope

OFFLINE_CREDENTIAL = "agent-eval-sandbox-offline"


@dataclass
class RunRequest:
    loaded: LoadedConfig
    dataset: Dataset
    settings: RunSettings
    invocations: list[Invocation]
    runs_base: Path
    run_id: str
    offline: bool
    project_root: Path
    claude_version: str | None = None
    rebuild_image: bool = False


@dataclass
class RunOutcome:
    run_dir: RunDir
    result: dict[str, Any]
    statuses: list[CaseStatus] = field(default_factory=list)
    score: ScoreResult | None = None


def aggregate(entries: list[dict[str, Any]], *, mode: str, model: str | None, wall_clock_s: float,
              agent_version: str) -> dict[str, Any]:
    """run_result.json in the reference shape (pure)."""
    usage: dict[str, int] = {}
    for entry in entries:
        for key, value in (entry.get("token_usage") or {}).items():
            usage[key] = usage.get(key, 0) + int(value)
    codes = [e["exit_code"] for e in entries]
    worst = 0
    for code in codes:
        if code is None:
            worst = worst or 1
        elif code != 0 and (worst == 0 or abs(code) > abs(worst)):
            worst = code
    per_case: dict[str, Any] = {}
    for entry in entries:
        for case_id in entry.get("cases", [entry["case_id"]]):
            per_case[case_id] = entry
    return {
        "exit_code": worst,
        "duration_s": round(sum(e["duration_s"] for e in entries), 3),
        "wall_clock_s": round(wall_clock_s, 3),
        "cost_usd": round(sum(e["cost_usd"] or 0 for e in entries), 6),
        "token_usage": usage,
        "num_turns": sum(e["num_turns"] or 0 for e in entries),
        "num_cases": len(per_case),
        "model": model,
        "agent": "claude-code",
        "agent_version": agent_version,
        "permission_denials": [d for e in entries for d in e["permission_denials"]],
        "execution_mode": mode,
        "end_reasons": {e["case_id"]: e["end_reason"] for e in entries},
        "per_case": per_case,
    }


def _gateway(request: RunRequest, environ: dict[str, str]) -> ModelGateway:
    policy = ac.gateway_policy(request.loaded.config, request.settings, environ)
    if request.offline:
        # Every channel gets its own scripted upstream; nothing leaves the host.
        return ModelGateway("http://127.0.0.1:9", Credentials(api_key=OFFLINE_CREDENTIAL), policy=policy)
    upstream_env = ac.gateway_upstream_env(request.loaded.config, environ)
    return ModelGateway(upstream_url_from_env(upstream_env), Credentials.from_env(upstream_env), policy=policy)


def execute_run(request: RunRequest, *, console: Console, err_console: Console, show_progress: bool = True) -> RunOutcome:
    config = request.loaded.config
    environ = dict(os.environ)

    def warn(message: str) -> None:
        err_console.print(f"warning: {message}", highlight=False, markup=False)

    if request.offline:
        missing = [inv.id for inv in request.invocations
                   if not offline_script_path(inv, request.loaded.dataset_dir).is_file()]
        if missing:
            warn(f"--offline: no {MODEL_SCRIPT_NAME} for {', '.join(missing[:5])}"
                 + (f" (+{len(missing) - 5})" if len(missing) > 5 else "")
                 + "; the scripted model only answers with a note")
    handlers = compile_handlers(request.loaded)
    _, dropped = ac.workspace_env(config, environ)
    for key in dropped:
        warn(f"execution.env.{key} is ignored: credentials and the model endpoint stay on the host")
    gateway = _gateway(request, environ)
    # Online, AskUserQuestion's model tier uses the host's credentials (never the sandbox's).
    answerer = AnthropicAnswerer(environ) if handlers is not None and not request.offline else None
    backend: SandboxBackend = get_backend(config.sandbox.backend)
    for removed in backend.reap_orphans():
        err_console.print(f"removed orphaned {removed.kind} {removed.name} ({removed.reason})", highlight=False)
    if config.sandbox.runtime:
        backend.check_runtime(config.sandbox.runtime)
    claude_version = request.claude_version or config.sandbox.claude_version or DEFAULT_CLAUDE_VERSION
    image = ensure_sandbox_image(
        ImageSettings(image=config.sandbox.image, base_image=config.sandbox.base_image, claude_version=claude_version,
                      exec_only=exec_only_binaries(config.sandbox.runtime)),
        rebuild=request.rebuild_image,
        bootstrap_missing_base=True,
        console=err_console,
    )
    run_dir = RunDir.create(request.runs_base, config.name, request.run_id)
    started = time.time()
    write_json(run_dir.root / "run.json", {
        "tool": "agent-eval-sandbox",
        "version": __version__,
        "eval": config.name,
        "config_path": str(request.loaded.path),
        "project_root": str(request.project_root),
        "run_id": request.run_id,
        "offline": request.offline,
        "image": image.ref,
        "claude_version": claude_version,
        "mode": config.execution.mode,
        "settings": {
            "timeout_s": request.settings.timeout_s,
            "max_budget_usd": request.settings.max_budget_usd,
            "parallelism": request.settings.parallelism,
            "model": request.settings.model,
        },
        "started_at": started,
    })
    staging = Path(tempfile.mkdtemp(prefix="aes-"))
    statuses = [CaseStatus(inv.id) for inv in request.invocations]
    entries: list[dict[str, Any]] = []
    hooks = HookRunner(
        RunInfo(
            run_id=request.run_id,
            run_dir=run_dir.root,
            project_root=request.project_root,
            config_path=request.loaded.path,
            workspace_root=staging,
            model=request.settings.model or "",
            caller_env=environ,
        ),
        report=lambda result: err_console.print(result.console_line, highlight=False, markup=False),
    )
    try:
        resources = []
        repo_copy = None
        is_denied = deny_filter(config)
        key = answer_key(request.loaded, runs_base=request.runs_base, handlers=handlers)
        if config.is_repo_mode:
            repo_copy = staging / "repo"
            report = stage_repo_workspace(request.project_root, repo_copy, exclude=key, is_denied=is_denied)
            note = commit_snapshot(repo_copy, path_var=clean_search_path(environ.get("PATH", ""), []) or os.defpath)
            if note:
                warn(note)
        else:
            staged = stage_project_resources(config, request.project_root, staging / "project",
                                             is_denied=is_denied, exclude=key)
            resources, report = staged.resources, staged.report
        left_out = left_out_line(key, report.excluded, request.project_root)
        if left_out:
            warn(left_out)
        with hooks.around_run(config.hooks) as before_all:
            ctx = RunContext(
                loaded=request.loaded,
                settings=request.settings,
                run_dir=run_dir,
                run_id=request.run_id,
                backend=backend,
                image_ref=image.ref,
                gateway=gateway,
                offline=request.offline,
                staging=staging,
                resources=resources,
                host_environ=environ,
                warn=warn,
                repo_copy=repo_copy,
                hooks=hooks,
                handlers=handlers,
                is_denied=is_denied,
                answerer=answerer,
                global_hook_outputs=before_all.outputs,
            )
            with run_scope(backend, request.run_id), ProgressDisplay(statuses, err_console, enabled=show_progress):
                pool = ThreadPoolExecutor(max_workers=max(1, request.settings.parallelism),
                                          thread_name_prefix="case")
                try:
                    futures = [
                        pool.submit(execute_invocation, ctx, inv, status, f"{index:04d}")
                        for index, (inv, status) in enumerate(zip(request.invocations, statuses, strict=True))
                    ]
                    entries = [future.result() for future in futures]
                except BaseException:
                    # Ctrl-C or SIGTERM: cases not started yet must not start now.
                    ctx.cancelled.set()
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
                pool.shutdown()
            case_data = {}
            for inv in request.invocations:
                case_file = run_dir.root / "cases" / inv.id / "hook_outputs.yaml"
                if case_file.is_file():
                    case_data[inv.id] = read_yaml_mapping(case_file)
            write_run_hook_outputs(run_dir.root, before_all.outputs.data, case_data)
            result = aggregate(entries, mode=config.execution.mode, model=request.settings.model,
                               wall_clock_s=time.time() - started, agent_version=claude_version)
            write_json(run_dir.root / "run_result.json", result)
            score = _score(request, run_dir, hooks, err_console)
    finally:
        gateway.close()
        if answerer is not None:
            answerer.close()
        shutil.rmtree(staging, ignore_errors=True)
    return RunOutcome(run_dir=run_dir, result=result, statuses=statuses, score=score)


def _score(request: RunRequest, run_dir: RunDir, hooks: HookRunner, err_console: Console) -> ScoreResult:
    """before_scoring hooks, the judges, before_report hooks, the reports."""
    config = request.loaded.config
    hooks.run(Phase.BEFORE_SCORING, config.hooks.before_scoring)
    echo = lambda line: err_console.print(line, highlight=False, markup=False)  # noqa: E731
    with _judge_endpoint(request) as endpoint:
        # Offline judge scripts are consumed request by request: one at a time keeps them in order.
        score = score_run(run_dir.root, request.loaded.path, echo=echo, endpoint=endpoint,
                          parallelism=1 if request.offline else DEFAULT_JUDGE_PARALLELISM)
    if config.hooks.before_report:
        hooks.run_safe(Phase.BEFORE_REPORT, config.hooks.before_report)
        score = build_reports(run_dir.root)
    return score


@contextmanager
def _judge_endpoint(request: RunRequest) -> Iterator[JudgeEndpoint | None]:
    """Offline, LLM judges talk to a scripted model: judge_script.yaml beside eval.yaml."""
    if not request.offline:
        yield None
        return
    path = request.loaded.root / JUDGE_SCRIPT_NAME
    if path.is_file():
        script = load_script(path)
        if script.advance is not Advance.PER_REQUEST:
            script = script.model_copy(update={"advance": Advance.PER_REQUEST})
    else:
        script = parse_script(
            [{"error": {"status": 400, "message": f"offline run: no {JUDGE_SCRIPT_NAME} beside eval.yaml "
                                                 "scripts the judge model"}}],
            source=f"(no {JUDGE_SCRIPT_NAME})",
        )
    with ScriptedModelServer(script) as server:
        yield JudgeEndpoint(base_url=server.url, api_key=OFFLINE_CREDENTIAL)
