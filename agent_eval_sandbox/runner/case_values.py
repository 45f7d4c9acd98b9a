"""The typed values that flow between a case's stages (`runner/case.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent_eval_sandbox.gateway.conversation import ConversationSnapshot
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.interception import ContainerSettings
from agent_eval_sandbox.lifecycle import CaseInfo
from agent_eval_sandbox.rundir.layout import CaseDir
from agent_eval_sandbox.rundir.models import EndReason, GatewayUse, StepOutcome
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.sandbox.base import ExecResult

TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


@dataclass(frozen=True)
class StagedCase:
    """The host side of a case before anything runs (the output of `prepare`)."""

    invocation: Invocation
    out: CaseDir  # where its files go (batch mode: the run's root)
    workspace: Path  # the staged workspace, copied in
    collected: Path  # where the workspace is copied out to
    transcripts: Path  # where $HOME/.claude/projects is copied out to
    channel_dir: Path  # mounted read-only at /run/agent-eval: sockets and the prompt
    managed_settings: Path  # mounted read-only at the managed settings path
    settings: ContainerSettings
    workspace_env: dict[str, str]

    @property
    def case(self) -> CaseInfo | None:
        """The case as hooks see it (None in batch mode, where per-case hooks do not run)."""
        if len(self.invocation.cases) != 1:
            return None
        case = self.invocation.cases[0]
        return CaseInfo(case.id, self.workspace, case.dir, case.input_file, run_dir=self.out.path)


@dataclass(frozen=True)
class AgentRun:
    """What the middle stages ended with: the agent's exec, or why there is none."""

    result: ExecResult | None = None
    error: str | None = None
    hook_failed: bool = False
    copied_out: bool = False
    # The tool's own plumbing failed (sandbox creation, copy-in, starting the agent, the gateway):
    # the case ends `infra_error`, not the skill's failure.
    infra: bool = False
    pipeline: PipelineRun | None = None  # a pipeline's steps (`execution.steps`); `result` is its last exec


@dataclass(frozen=True)
class PipelineRun:
    """What the steps of a pipeline ended with (runner/step_loop.py)."""

    steps: tuple[StepOutcome, ...]
    # A step whose failure is otherwise tolerated (on_failure: continue) but that the case's
    # deadline or budget stopped: the case's ending is its.
    hard_stop: StepOutcome | None = None
    # Why steps were left unstarted whatever their on_failure (the case's deadline or budget, an
    # interrupt): a pipeline cut short is not complete, even when every step that ran ended by itself.
    cut: EndReason | None = None


@dataclass(frozen=True)
class ChannelUse:
    """The case's gateway channel, once closed: what it counted and what it saw."""

    gateway: GatewayUse = field(default_factory=GatewayUse)
    conversation: ConversationSnapshot | None = None
    usage: dict[str, int] = field(default_factory=dict)  # tokens of every answer the channel paid for

    @classmethod
    def of(cls, channel: Channel | None) -> ChannelUse:
        if channel is None:
            return cls()
        usage = channel.usage
        return cls(
            GatewayUse(requests=channel.requests, refused=channel.refused, spent_usd=round(channel.spent_usd, 6)),
            channel.conversation.snapshot(),
            {key: value for key, value in usage.model_dump().items() if key in TOKEN_KEYS},
        )
