"""An eval project on disk and the `RunContext` of a run of it, on the fake sandbox backend.

Everything but the sandbox is real: the config loader, the offline scripted
model server behind the real gateway, the hook runner, the run directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config
from agent_eval_sandbox.config.settings import CliOverrides, RunSettings, resolve_run_settings
from agent_eval_sandbox.interception import compile_handlers, deny_filter
from agent_eval_sandbox.lifecycle import HookRunner, RunInfo
from agent_eval_sandbox.lifecycle.outputs import HookOutputs
from agent_eval_sandbox.rundir.layout import CaseDir, RunDir
from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner import collect
from agent_eval_sandbox.runner.case import run_case
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.model_access import ModelAccess, OfflineModels
from agent_eval_sandbox.runner.plan import Invocation, plan_invocations
from agent_eval_sandbox.sandbox.fake import FakeBackend

RUN_ID = "r1"
MODEL = "claude-sonnet-4-6"


def write_tool_step(path: str, content: str) -> dict[str, Any]:
    return {"tool": "Write", "input": {"file_path": path, "content": content}}


class Project:
    """eval.yaml, cases and their model scripts under a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def eval_yaml(self, extra: str = "", *, execution: str = "") -> Path:
        """A skill eval whose cases get seed.txt and whose `out/` is collected; `extra` is more top-level YAML."""
        self.write(".claude/skills/scribe/SKILL.md", "---\nname: scribe\ndescription: writes files\n---\nDo it.\n")
        return self.write("eval.yaml", f"""
name: fake-run
execution: {{skill: scribe, arguments: "{{task}}", timeout: 60, max_budget_usd: 5{execution}}}
models: {{skill: {MODEL}}}
runner: {{permission_mode: bypassPermissions}}
dataset: {{path: cases, workspace: {{files: [seed.txt]}}}}
outputs: [{{path: out}}]
{textwrap.dedent(extra)}
""")

    def case(self, case_id: str, script: list[dict[str, Any]] | None = None, *, task: str = "go") -> Path:
        case_dir = self.root / "cases" / case_id
        case_dir.mkdir(parents=True, exist_ok=True)
        (case_dir / "input.yaml").write_text(yaml.safe_dump({"task": task}))
        (case_dir / "seed.txt").write_text("seed\n")
        steps = script if script is not None else [write_tool_step("out/hello.txt", f"hi from {case_id}"),
                                                    {"text": f"{case_id} done"}]
        (case_dir / "model_script.yaml").write_text(yaml.safe_dump(steps, sort_keys=False))
        return case_dir


@dataclass
class Pipeline:
    """A run's context on the fake backend, and what its cases reported."""

    ctx: RunContext
    backend: FakeBackend
    invocations: list[Invocation]
    warnings: list[str] = field(default_factory=list)
    hook_lines: list[str] = field(default_factory=list)

    def invocation(self, case_id: str) -> Invocation:
        return next(inv for inv in self.invocations if inv.id == case_id)

    def run(self, case_id: str) -> CaseOutcome:
        index = [inv.id for inv in self.invocations].index(case_id)
        return run_case(self.ctx, self.invocation(case_id), CaseStatus(case_id), f"{index:04d}")

    def case_dir(self, case_id: str) -> CaseDir:
        return self.ctx.run_dir.case(case_id)

    def interrupt_after_collecting(self, monkeypatch: pytest.MonkeyPatch, files: int) -> None:
        """Ctrl-C once `files` of the agent's changed files were copied into a case's `_modified/`."""
        real, copied = collect._copy_file, []

        def copy(src: Path, dest: Path) -> None:
            real(src, dest)
            if "_modified" in dest.parts:
                copied.append(dest)
                if len(copied) == files:
                    self.ctx.cancelled.set()

        monkeypatch.setattr(collect, "_copy_file", copy)

    def close(self) -> None:
        self.ctx.gateway.close()
        self.ctx.models.close()
        shutil.rmtree(self.ctx.staging, ignore_errors=True)


def build_pipeline(project: Path, backend: FakeBackend, *, timeout: int | None = None,
                   parallelism: int | None = None, run_id: str = RUN_ID,
                   models: Callable[[LoadedConfig, RunSettings], ModelAccess] | None = None) -> Pipeline:
    """What `app/run.py` builds before the first case, minus the image and the project's resources
    (`models`: the run's model access; default offline)."""
    loaded = load_eval_config(project / "eval.yaml")
    dataset = load_dataset(loaded)
    settings = resolve_run_settings(loaded.config, CliOverrides(timeout=timeout, parallelism=parallelism),
                                    num_cases=len(dataset.cases))
    invocations = plan_invocations(loaded.config, dataset.cases, settings)
    # Host hooks need a PATH; nothing else of the caller's environment is needed.
    environ = {"PATH": os.environ.get("PATH", os.defpath)}
    access = models(loaded, settings) if models is not None else OfflineModels(loaded)
    # Short: the gateway's unix socket lives under it (socket paths are limited to ~100 bytes).
    staging = Path(tempfile.mkdtemp(prefix="aes-", dir="/tmp"))
    run_dir = RunDir.create(project / "runs", loaded.config.name, run_id)
    hook_lines: list[str] = []
    warnings: list[str] = []
    hooks = HookRunner(
        RunInfo(run_id=run_id, run_dir=run_dir.root, project_root=loaded.root, config_path=loaded.path,
                workspace_root=staging, model=settings.model or "", caller_env=environ),
        report=lambda result: hook_lines.append(result.console_line),
    )
    ctx = RunContext(
        loaded=loaded, settings=settings, run_dir=run_dir, run_id=run_id, backend=backend, image_ref="fake-image",
        gateway=access.gateway(ac.gateway_policy(loaded.config, settings, environ)), models=access, staging=staging,
        resources=(), host_environ=environ, warn=warnings.append, hooks=hooks, handlers=compile_handlers(loaded),
        is_denied=deny_filter(loaded.config), global_hook_outputs=HookOutputs(), repo_copy=None,
    )
    return Pipeline(ctx, backend, invocations, warnings, hook_lines)
