"""The values of lifecycle hooks: phases, per-hook results, the abort error (pure)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval_sandbox.config.models import HookEntry
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.lifecycle.outputs import HookOutputs


class Phase(enum.StrEnum):
    BEFORE_ALL = "before_all"
    BEFORE_EACH = "before_each"
    BEFORE_STEP = "before_step"
    AFTER_STEP = "after_step"
    AFTER_EACH = "after_each"
    BEFORE_SCORING = "before_scoring"
    AFTER_ALL = "after_all"
    BEFORE_REPORT = "before_report"

    @property
    def aborting(self) -> bool:
        """A failing `on_failure: fail` hook stops what follows; the others always continue."""
        return self in (Phase.BEFORE_ALL, Phase.BEFORE_EACH, Phase.BEFORE_STEP, Phase.BEFORE_SCORING)

    @property
    def per_case(self) -> bool:
        return self in (Phase.BEFORE_EACH, Phase.AFTER_EACH, Phase.BEFORE_STEP, Phase.AFTER_STEP)

    @property
    def collects_outputs(self) -> bool:
        return self in (Phase.BEFORE_ALL, Phase.BEFORE_EACH)


class HookStatus(enum.StrEnum):
    OK = "OK"
    FAIL = "FAIL"
    TIMEOUT = "TIMEOUT"
    SKIP = "SKIP"


@dataclass(frozen=True)
class CommandOutcome:
    """How one command (a hook or its condition) ended, wherever it ran."""

    exit_code: int | None  # None when it timed out or never started
    timed_out: bool = False
    error: str = ""  # why it could not run at all (bash missing, sandbox gone)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.error


@dataclass(frozen=True)
class HookResult:
    phase: Phase
    index: int
    hook: HookEntry
    case_id: str | None
    status: HookStatus
    duration_s: float  # wall clock of condition, command and outputs together
    log_path: Path
    exit_code: int | None = None
    # Why a FAIL has no failing exit code: it never ran, or its outputs were refused.
    reason: str = ""
    outputs: HookOutputs = field(default_factory=HookOutputs)
    warnings: tuple[str, ...] = ()
    # What kept the hook from running (a broken sandbox, an unwritable log), for `raise ... from`.
    exception: Exception | None = field(default=None, compare=False, repr=False)

    @property
    def failed(self) -> bool:
        return self.status in (HookStatus.FAIL, HookStatus.TIMEOUT)

    @property
    def name(self) -> str:
        """`<phase>[.<case_id>].<index>`, the log file's stem."""
        return self.log_path.name.removesuffix(".log")

    @property
    def status_text(self) -> str:
        if self.status is HookStatus.TIMEOUT:
            return f"TIMEOUT ({self.hook.timeout}s)"
        if self.status is HookStatus.SKIP:
            return "SKIP (condition)"
        if self.status is HookStatus.FAIL:
            if self.exit_code not in (None, 0):
                return f"FAIL (exit {self.exit_code})"
            return f"FAIL ({self.reason})"
        return "OK"

    @property
    def console_line(self) -> str:
        return f"hook {self.name}: {self.hook.label} ... {self.status_text}"


@dataclass(frozen=True)
class PhaseResult:
    phase: Phase
    case_id: str | None
    results: tuple[HookResult, ...] = ()

    @property
    def outputs(self) -> HookOutputs:
        """The outputs of the phase's successful hooks, later hooks winning."""
        merged = HookOutputs()
        for result in self.results:
            merged = merged.merged(result.outputs)
        return merged

    @property
    def failures(self) -> tuple[HookResult, ...]:
        return tuple(result for result in self.results if result.failed)


class HookFailed(UserError):
    """A hook with `on_failure: fail` failed in an aborting phase; what follows must not run."""

    def __init__(self, result: HookResult, phase_result: PhaseResult) -> None:
        self.result = result
        self.phase_result = phase_result
        where = f" for case {result.case_id}" if result.case_id else ""
        super().__init__(
            f"{result.phase} hook #{result.index}{where} failed: {result.hook.label} — {result.status_text}",
            fix=f"see {result.log_path}",
        )

    @property
    def hook(self) -> HookEntry:
        return self.result.hook
