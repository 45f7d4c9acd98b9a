"""`HookRunner`: one phase's hooks, in order, with the reference's failure rules.

`run` raises `HookFailed` in an aborting phase (before_all, before_each,
before_scoring) when an `on_failure: fail` hook fails or times out. In the
other phases it is `run_safe`, which never raises an `Exception`: every
problem, including a broken sandbox or a log that cannot be written, becomes
a failed `HookResult`, so a cleanup phase run from a `finally` never masks the
error that got there. `around_run` and `around_case` are those `finally`s.

Every hook gets `<run-dir>/hooks/<phase>[.<case_id>].<index>.log` (its
condition's output, its own, and a bracketed note from us when we skipped or
killed it) and one call of the `report` callback with its result.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, NamedTuple, Protocol

from agent_eval_sandbox.config.models import HookEntry, HooksConfig
from agent_eval_sandbox.lifecycle.container import SandboxExecutor
from agent_eval_sandbox.lifecycle.env import (
    CaseInfo,
    RunInfo,
    container_env,
    host_cwd,
    host_env,
)
from agent_eval_sandbox.lifecycle.host import DEFAULT_KILL_GRACE_S, HostExecutor
from agent_eval_sandbox.lifecycle.model import (
    CommandOutcome,
    HookFailed,
    HookResult,
    HookStatus,
    Phase,
    PhaseResult,
)
from agent_eval_sandbox.lifecycle.outputs import (
    HookOutputs,
    HookOutputsError,
    OutputsFile,
)
from agent_eval_sandbox.sandbox.base import Sandbox

CONDITION_TIMEOUT_S = 30.0

Reporter = Callable[[HookResult], None]
# A sandbox, or a function that returns it (creating it on first call), so
# host-scope before_each hooks can prepare the workspace before it is copied in.
SandboxSource = Sandbox | Callable[[], Sandbox] | None


class Executor(Protocol):
    def run(self, command: str, *, timeout_s: float, log: BinaryIO) -> CommandOutcome: ...

    def take_outputs(self) -> OutputsFile | None: ...


class _Verdict(NamedTuple):
    status: HookStatus
    exit_code: int | None = None
    reason: str = ""
    found: OutputsFile | None = None


class NoSandboxError(Exception):
    """A container-scope hook was given no sandbox to run in."""


def print_to_stderr(result: HookResult) -> None:
    print(result.console_line, file=sys.stderr)


def log_name(phase: Phase, case_id: str | None, index: int) -> str:
    """`<phase>[.<case_id>].<index>.log`, the case id made safe for a file name."""
    if case_id is None:
        return f"{phase}.{index}.log"
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in case_id)
    return f"{phase}.{safe}.{index}.log"


class HookRunner:
    """Runs hook phases of one run. Holds no per-call state, so cases may share it across threads."""

    def __init__(
        self,
        run: RunInfo,
        *,
        report: Reporter = print_to_stderr,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        condition_timeout_s: float = CONDITION_TIMEOUT_S,
    ) -> None:
        self.run_info = run
        self.report = report
        self.kill_grace_s = kill_grace_s
        self.condition_timeout_s = condition_timeout_s

    def run(
        self,
        phase: Phase | str,
        hooks: Sequence[HookEntry],
        *,
        case: CaseInfo | None = None,
        sandbox: SandboxSource = None,
    ) -> PhaseResult:
        """Run `hooks` in order; in an aborting phase, raise `HookFailed` at the first fatal failure."""
        phase = Phase(phase)
        if not phase.aborting:
            return self.run_safe(phase, hooks, case=case, sandbox=sandbox)
        _check_case(phase, case)
        results: list[HookResult] = []
        for index, hook in enumerate(hooks):
            result = self._run_one(phase, index, hook, case, sandbox)
            self.report(result)
            results.append(result)
            if result.failed and hook.on_failure == "fail":
                raise HookFailed(result, PhaseResult(phase, _case_id(case), tuple(results))) from result.exception
        return PhaseResult(phase, _case_id(case), tuple(results))

    def run_safe(
        self,
        phase: Phase | str,
        hooks: Sequence[HookEntry],
        *,
        case: CaseInfo | None = None,
        sandbox: SandboxSource = None,
    ) -> PhaseResult:
        """Run every hook whatever happens; `on_failure` is ignored. Raises no `Exception`."""
        phase = Phase(phase)
        _check_case(phase, case)
        results: list[HookResult] = []
        for index, hook in enumerate(hooks):
            result = self._run_one(phase, index, hook, case, sandbox)
            # A broken console must not stop a cleanup phase, nor mask what led to it.
            with suppress(Exception):
                self.report(result)
            results.append(result)
        return PhaseResult(phase, _case_id(case), tuple(results))

    @contextmanager
    def around_run(self, hooks: HooksConfig) -> Iterator[PhaseResult]:
        """before_all now (may raise `HookFailed`); after_all on the way out, always."""
        try:
            yield self.run(Phase.BEFORE_ALL, hooks.before_all)
        finally:
            self.run_safe(Phase.AFTER_ALL, hooks.after_all)

    @contextmanager
    def around_case(
        self, hooks: HooksConfig, case: CaseInfo, *, sandbox: SandboxSource = None
    ) -> Iterator[PhaseResult]:
        """before_each now (may raise `HookFailed`); after_each on the way out, always."""
        try:
            yield self.run(Phase.BEFORE_EACH, hooks.before_each, case=case, sandbox=sandbox)
        finally:
            self.run_safe(Phase.AFTER_EACH, hooks.after_each, case=case, sandbox=sandbox)

    def _run_one(
        self, phase: Phase, index: int, hook: HookEntry, case: CaseInfo | None, sandbox: SandboxSource
    ) -> HookResult:
        case_id = _case_id(case)
        if case is not None and case.step_id is not None:
            case_id = f"{case_id}.{case.step_id}"
        log_path = self.run_info.log_dir / log_name(phase, case_id, index)
        started = time.monotonic()
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "wb", buffering=0) as log:
                executor = self._executor(phase, hook, case, sandbox)
                verdict = self._execute(executor, phase, hook, log)
            exception = None
        except Exception as exc:  # a hook that cannot run is a failed hook, not a crashed run
            verdict, exception = _Verdict(HookStatus.FAIL, None, _describe(exc)), exc
            _append_note(log_path, verdict.reason)
        found = verdict.found
        return HookResult(
            phase=phase,
            index=index,
            hook=hook,
            case_id=_case_id(case),
            status=verdict.status,
            duration_s=round(time.monotonic() - started, 3),
            log_path=log_path,
            exit_code=verdict.exit_code,
            reason=verdict.reason,
            outputs=found.outputs if found else HookOutputs(),
            warnings=found.warnings if found else (),
            exception=exception,
        )

    def _execute(self, executor: Executor, phase: Phase, hook: HookEntry, log: BinaryIO) -> _Verdict:
        if hook.condition:
            guard = executor.run(hook.condition, timeout_s=self.condition_timeout_s, log=log)
            if not guard.ok:
                _note(log, f"condition {_ended(guard, self.condition_timeout_s)}: hook skipped")
                return _Verdict(HookStatus.SKIP)
        outcome = executor.run(hook.command, timeout_s=hook.timeout, log=log)
        if not outcome.ok:
            _note(log, f"hook {_ended(outcome, hook.timeout)}")
            if phase.collects_outputs:
                self._discard_outputs(executor, log)
            status = HookStatus.TIMEOUT if outcome.timed_out else HookStatus.FAIL
            return _Verdict(status, outcome.exit_code, outcome.error)
        if not phase.collects_outputs:
            return _Verdict(HookStatus.OK, 0)
        try:
            found = executor.take_outputs()
        except HookOutputsError as exc:
            _note(log, exc.render())
            return _Verdict(HookStatus.FAIL, 0, exc.render())
        for warning in found.warnings if found else ():
            _note(log, f"warning: {warning}")
        return _Verdict(HookStatus.OK, 0, "", found)

    @staticmethod
    def _discard_outputs(executor: Executor, log: BinaryIO) -> None:
        # Deleted so the next hook cannot pass them off as its own.
        try:
            if executor.take_outputs() is not None:
                _note(log, "outputs of the failed hook discarded")
        except HookOutputsError as exc:
            _note(log, f"outputs of the failed hook discarded: {exc.render()}")

    def _executor(
        self, phase: Phase, hook: HookEntry, case: CaseInfo | None, sandbox: SandboxSource
    ) -> Executor:
        run = self.run_info
        if hook.scope == "container":
            if case is None or sandbox is None:
                raise NoSandboxError(f"no sandbox to run a container-scope {phase} hook in")
            box = sandbox if isinstance(sandbox, Sandbox) else sandbox()
            return SandboxExecutor(box, container_env(run, case, box.spec.workspace))
        if case is not None:
            cwd = host_cwd(phase, run, case)
            return HostExecutor(cwd, host_env(run, case), (case.workspace,), self.kill_grace_s)
        outputs_dirs = _unique_dirs(run.workspace_root, run.project_root)
        return HostExecutor(run.project_root, host_env(run, None), outputs_dirs, self.kill_grace_s)


def _check_case(phase: Phase, case: CaseInfo | None) -> None:
    if phase.per_case and case is None:
        raise ValueError(f"{phase} hooks need the case they run for")
    if not phase.per_case and case is not None:
        raise ValueError(f"{phase} hooks run once per run, not for a case")


def _case_id(case: CaseInfo | None) -> str | None:
    return case.id if case is not None else None


def _unique_dirs(*dirs: Path) -> tuple[Path, ...]:
    """The reference reads before_all outputs from the workspace root; its docs also say the cwd."""
    unique: dict[Path, Path] = {}
    for directory in dirs:
        unique.setdefault(directory.resolve(), directory)
    return tuple(unique.values())


def _ended(outcome: CommandOutcome, timeout_s: float) -> str:
    if outcome.timed_out:
        return f"timed out after {timeout_s:g}s and was killed"
    if outcome.error:
        return f"could not run: {outcome.error}"
    return f"exited {outcome.exit_code}"


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _note(log: BinaryIO, text: str) -> None:
    log.write(f"\n[agent-eval-sandbox] {text}\n".encode())


def _append_note(path: Path, text: str) -> None:
    try:
        with open(path, "ab") as log:
            _note(log, text)
    except OSError:
        pass  # the log directory itself is what failed; the result carries the reason
