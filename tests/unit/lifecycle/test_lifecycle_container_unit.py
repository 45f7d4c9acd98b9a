"""SandboxExecutor's decisions against a scripted sandbox: the races and breakages a real
container cannot be made to produce on demand (real-container tests: tests/integration/lifecycle)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import UnsafeArchiveError
from agent_eval_sandbox.lifecycle.container import CONFINED, SandboxExecutor, hook_argv
from agent_eval_sandbox.lifecycle.outputs import OUTPUT_FILE_NAMES, HookOutputsError
from agent_eval_sandbox.sandbox import process_scripts as ps
from agent_eval_sandbox.sandbox.archive import CopyOutReport, SkippedEntry
from agent_eval_sandbox.sandbox.base import EndReason, ExecResult, Sandbox, SandboxSpec


def done(exit_code: int = 0, stdout: bytes = b"", stderr: bytes = b"", reason=EndReason.EXITED) -> ExecResult:
    return ExecResult(
        exit_code=exit_code, end_reason=reason, signal=None, duration_s=0.0, oom_kills=0,
        pids_limit_hit=False, stdout=stdout, stderr=stderr,
    )


class ScriptedSandbox(Sandbox):
    """Answers exec by the command's first word; copy_out by a function."""

    def __init__(self, answers: dict[str, ExecResult], copy_out: Callable[[str, Path], CopyOutReport]) -> None:
        self._spec = SandboxSpec(image="img", run_id="run", case_id="case", deadline_epoch=0.0)
        self.answers = answers
        self._copy_out = copy_out
        self.commands: list[list[str]] = []

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    @property
    def name(self) -> str:
        return "scripted"

    def exec(self, cmd, **kwargs) -> ExecResult:
        self.commands.append(list(cmd))
        key = ("look" if ps.LOOK in cmd else "rm" if ps.REMOVE in cmd
               else "bash" if cmd[-3:-1] == ["bash", "-c"] else cmd[0])
        return self.answers[key]

    def copy_out(self, src: str, dest_dir: Path, *, max_bytes: int, max_files: int) -> CopyOutReport:
        return self._copy_out(src, dest_dir)

    def copy_in(self, src_dir, dest):
        raise NotImplementedError

    def copy_in_files(self, files, dest, *, mode=0o644):
        raise NotImplementedError

    def freeze(self) -> None:
        raise NotImplementedError

    def thaw(self) -> bool:
        raise NotImplementedError

    @property
    def frozen(self) -> bool:
        return False

    def destroy(self) -> None:
        raise NotImplementedError


LOOK_REGULAR = done(stdout=b"regular file|20|/workspace/.hook-outputs.yaml\n")


def never_copied(src: str, dest: Path) -> CopyOutReport:
    raise AssertionError("nothing should be copied out")


def test_nothing_there_means_one_look_and_nothing_else():
    box = ScriptedSandbox({"look": done()}, never_copied)
    assert SandboxExecutor(box, {}).take_outputs() is None
    assert box.commands == [ps.interpreter(ps.LOOK, *(f"/workspace/{name}" for name in OUTPUT_FILE_NAMES))]


def test_file_turned_into_a_link_between_look_and_copy_is_refused_and_deleted():
    def copy(src: str, dest: Path) -> CopyOutReport:
        return CopyOutReport(found=True, skipped=(SkippedEntry(".hook-outputs.yaml", "symlink"),))

    box = ScriptedSandbox({"look": LOOK_REGULAR, "rm": done()}, copy)
    with pytest.raises(HookOutputsError, match=r"\(in the sandbox\): changed while being read; refused"):
        SandboxExecutor(box, {}).take_outputs()
    assert box.commands[-1] == ps.interpreter(ps.REMOVE, "/workspace/.hook-outputs.yaml")


def test_file_grown_past_the_cap_between_look_and_copy_is_refused():
    def copy(src: str, dest: Path) -> CopyOutReport:
        raise UnsafeArchiveError("archive exceeds the cap")

    box = ScriptedSandbox({"look": LOOK_REGULAR, "rm": done()}, copy)
    with pytest.raises(HookOutputsError, match="changed while being read"):
        SandboxExecutor(box, {}).take_outputs()


def test_file_gone_between_look_and_copy_is_refused():
    box = ScriptedSandbox({"look": LOOK_REGULAR, "rm": done()}, lambda src, dest: CopyOutReport(found=False))
    with pytest.raises(HookOutputsError, match="changed while being read"):
        SandboxExecutor(box, {}).take_outputs()


def test_good_file_is_parsed_and_deleted():
    def copy(src: str, dest: Path) -> CopyOutReport:
        (dest / ".hook-outputs.yaml").write_text("env: {A: b}\n")
        return CopyOutReport(found=True, files=1)

    box = ScriptedSandbox({"look": LOOK_REGULAR, "rm": done()}, copy)
    found = SandboxExecutor(box, {}).take_outputs()
    assert found is not None and found.outputs.env == {"A": "b"}
    assert found.source == "/workspace/.hook-outputs.yaml (in the sandbox)"
    assert ps.REMOVE in box.commands[-1]


def test_undeletable_file_is_refused():
    def copy(src: str, dest: Path) -> CopyOutReport:
        (dest / ".hook-outputs.yaml").write_text("env: {A: b}\n")
        return CopyOutReport(found=True, files=1)

    box = ScriptedSandbox({"look": LOOK_REGULAR, "rm": done(1, stderr=b"rm: Permission denied")}, copy)
    with pytest.raises(HookOutputsError, match=r"could not be deleted \(rm: Permission denied\)"):
        SandboxExecutor(box, {}).take_outputs()


def test_failed_look_is_a_refusal():
    box = ScriptedSandbox({"look": done(2, stderr=b"sh: stat: not found")}, never_copied)
    with pytest.raises(HookOutputsError, match=r"could not look for hook outputs \(sh: stat: not found\)"):
        SandboxExecutor(box, {}).take_outputs()


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (done(0), (0, False, "")),
        (done(137, reason=EndReason.TIMED_OUT), (None, True, "")),
        (done(137, reason=EndReason.OOM_KILLED), (137, False, "")),
        (ExecResult(None, EndReason.SIGNALED, 9, 0.0, None, None, None, None), (None, False, "ended without an exit code (signaled)")),
    ],
)
def test_exec_results_map_to_outcomes(result, expected):
    box = ScriptedSandbox({"bash": result}, never_copied)
    outcome = SandboxExecutor(box, {"X": "y"}).run("true", timeout_s=5, log=io.BytesIO())
    assert (outcome.exit_code, outcome.timed_out, outcome.error) == expected
    assert box.commands == [hook_argv("true")] and hook_argv("true")[:4] == list(CONFINED)
