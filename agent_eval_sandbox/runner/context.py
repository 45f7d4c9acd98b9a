"""What every case of one run shares (`RunContext`), and a case's live progress (`CaseStatus`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.gateway.gateway import ModelGateway
from agent_eval_sandbox.interception import ToolHandlers
from agent_eval_sandbox.lifecycle import HookRunner
from agent_eval_sandbox.lifecycle.outputs import HookOutputs
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.runner.model_access import ModelAccess
from agent_eval_sandbox.runner.workspace import DeniedPredicate, StagedResource
from agent_eval_sandbox.sandbox.base import SandboxBackend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """Built once per run, before the first case; read-only afterwards (cases run in parallel)."""

    loaded: LoadedConfig
    settings: RunSettings
    run_dir: RunDir
    run_id: str
    backend: SandboxBackend
    image_ref: str
    gateway: ModelGateway
    models: ModelAccess
    staging: Path  # per-case host directories live under it
    resources: tuple[StagedResource, ...]  # the project's read-only resources, mounted into every case
    host_environ: Mapping[str, str]
    warn: Callable[[str], None]
    hooks: HookRunner
    handlers: ToolHandlers | None  # compiled inputs.tools (None: no interception)
    is_denied: DeniedPredicate  # workspace paths kept out of every sandbox
    global_hook_outputs: HookOutputs  # before_all's env and data
    repo_copy: Path | None  # the staged project copy for workspace_mode: repo
    # Set on Ctrl-C/SIGTERM: cases not started yet must not start.
    cancelled: threading.Event = field(default_factory=threading.Event)

    @property
    def config(self) -> EvalConfig:
        return self.loaded.config

    @property
    def per_case_hooks(self) -> bool:
        """before_each/after_each run for isolated case workspaces only (as in the reference)."""
        return not self.config.is_batch and not self.config.is_repo_mode


@dataclass
class CaseStatus:
    """Live progress of one invocation, written by its worker and read by the display thread."""

    id: str
    state: str = "queued"
    started: float | None = None
    finished: float | None = None
    channel_cost: Callable[[], float] | None = None
    final_cost: float | None = None
    detail: str = ""

    def __setattr__(self, name: str, value: object) -> None:
        # Every stage of a case is a change of `state`: -v shows each as it happens.
        if name == "state" and value != getattr(self, "state", None):
            log.debug("case %s: %s", self.id, value)
        super().__setattr__(name, value)

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started

    @property
    def cost(self) -> float:
        if self.final_cost is not None:
            return self.final_cost
        return self.channel_cost() if self.channel_cost else 0.0
