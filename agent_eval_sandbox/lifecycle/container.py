"""Running a container-scope hook inside the case's sandbox.

The hook runs as the sandbox user in the sandbox workspace, under the
sandbox's limits and the agent's seccomp filter, with `on_timeout="kill_exec"`:
at the deadline only the hook's processes die and the sandbox stays usable for
the agent and the other hooks. Its `.hook-outputs` file is first looked at with `lstat` (kind
and size, a link is not followed), then only a small regular file is copied
out through the sandbox's safe archive extraction, and whatever was found is
deleted inside the sandbox.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agent_eval_sandbox.errors import UnsafeArchiveError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.lifecycle.model import CommandOutcome
from agent_eval_sandbox.lifecycle.outputs import (
    MAX_OUTPUT_BYTES,
    OUTPUT_FILE_NAMES,
    HookOutputsError,
    OutputsFile,
    ambiguous_outputs,
    parse_hook_outputs,
)
from agent_eval_sandbox.sandbox import process_scripts as ps
from agent_eval_sandbox.sandbox.base import EndReason, Sandbox
from agent_eval_sandbox.sandbox.held_dirs import HeldDir

# Cap of what one hook may write to its log from inside the sandbox.
MAX_LOG_BYTES = 16 * 1024 * 1024
_HOUSEKEEPING_TIMEOUT_S = 30.0


# A hook may run what the agent wrote: it runs under the agent's seccomp filter (inside/confine.py).
# The interpreter that installs it is the execute-only one, non-dumpable from its first instruction:
# under plain python3 a process the agent left running attached to it (same user) before the filter
# was on, and made a vsock socket and an io_uring through it (found by the twelfth round's helper).
CONFINED = (*paths.PROTECTED_INTERPRETER, paths.CONFINE)


def hook_argv(command: str) -> list[str]:
    """What a container hook's command runs as in the sandbox."""
    return [*CONFINED, "bash", "-c", command]


@dataclass(frozen=True)
class SandboxExecutor:
    sandbox: Sandbox
    env: Mapping[str, str]

    @property
    def workspace(self) -> str:
        return self.sandbox.spec.workspace.rstrip("/") or "/"

    def run(self, command: str, *, timeout_s: float, log: BinaryIO) -> CommandOutcome:
        result = self.sandbox.exec(
            hook_argv(command),
            user=self.sandbox.spec.hardening.user,
            cwd=self.workspace,
            env=self.env,
            stdout=log,
            stderr=log,
            timeout=timeout_s,
            on_timeout="kill_exec",
            max_output_bytes=MAX_LOG_BYTES,
        )
        if result.end_reason is EndReason.TIMED_OUT:
            return CommandOutcome(exit_code=None, timed_out=True)
        if result.exit_code is None:
            return CommandOutcome(exit_code=None, error=f"ended without an exit code ({result.end_reason.value})")
        return CommandOutcome(exit_code=result.exit_code)

    def take_outputs(self) -> OutputsFile | None:
        found = self._look()
        if not found:
            return None
        result: OutputsFile | None = None
        failure: HookOutputsError | None = None
        try:
            result = self._read(found)
        except HookOutputsError as exc:
            failure = exc
        # Deleted whatever it held, so no later hook inherits it.
        self._delete([entry.path for entry in found])
        if failure is not None:
            raise failure
        return result

    def _look(self) -> list[_Found]:
        """What sits under the output names, as `lstat` (which never follows a link) sees it."""
        paths = [f"{self.workspace}/{name}" for name in OUTPUT_FILE_NAMES]
        probe = self.sandbox.exec(
            ps.interpreter(ps.LOOK, *paths),
            user=self.sandbox.spec.hardening.user,
            cwd=self.workspace,
            timeout=_HOUSEKEEPING_TIMEOUT_S,
            on_timeout="kill_exec",
        )
        if not probe.ok:
            detail = (probe.stderr or b"").decode("utf-8", "replace").strip()[:200]
            raise HookOutputsError(f"{self.workspace} (in the sandbox): could not look for hook outputs ({detail})")
        found = []
        for line in (probe.stdout or b"").decode("utf-8", "replace").splitlines():
            kind, size, path = line.split("|", 2)
            found.append(_Found(path=path, kind=kind, size=int(size)))
        return found

    def _read(self, found: list[_Found]) -> OutputsFile:
        if len(found) > 1:
            raise ambiguous_outputs(f"{self.workspace} (in the sandbox)")
        entry = found[0]
        source = f"{entry.path} (in the sandbox)"
        if entry.kind == "symbolic link":
            raise HookOutputsError(f"{source}: is a symbolic link; refused (links are never followed)")
        if not entry.kind.startswith("regular"):
            raise HookOutputsError(f"{source}: is a {entry.kind}, not a regular file; refused")
        if entry.size > MAX_OUTPUT_BYTES:
            raise HookOutputsError(f"{source}: larger than {MAX_OUTPUT_BYTES} bytes; refused")
        name = entry.path.rpartition("/")[2]
        with HeldDir(Path(tempfile.gettempdir()), "aes-hook-outputs-") as held:
            # The hook's background children may still be at work: the archive
            # is the authority, and refuses a link or growth past the cap.
            changed = HookOutputsError(f"{source}: changed while being read; refused")
            try:
                report = self.sandbox.copy_out(entry.path, held.path, max_bytes=MAX_OUTPUT_BYTES, max_files=1)
            except UnsafeArchiveError:
                raise changed from None
            copy = held.path / name
            if report.skipped or not copy.is_file() or copy.is_symlink():
                raise changed
            return parse_hook_outputs(copy.read_bytes(), source=source, is_json=name.endswith(".json"))

    def _delete(self, paths: list[str]) -> None:
        result = self.sandbox.exec(
            ps.interpreter(ps.REMOVE, *paths),
            user=self.sandbox.spec.hardening.user,
            cwd=self.workspace,
            timeout=_HOUSEKEEPING_TIMEOUT_S,
            on_timeout="kill_exec",
        )
        if not result.ok:
            detail = (result.stderr or b"").decode("utf-8", "replace").strip()[:200]
            raise HookOutputsError(f"{', '.join(paths)} (in the sandbox): could not be deleted ({detail}); refused")


@dataclass(frozen=True)
class _Found:
    path: str
    kind: str  # as `stat -c %F` names it: "regular file", "symbolic link", "directory", ...
    size: int
