"""Running a hook command on the host: its own session, a deadline, nothing left behind.

`bash -c` starts a new session (so a new process group, and no controlling
terminal: Ctrl-C reaches us, not the hook). At the deadline the whole group
gets SIGTERM, then SIGKILL after a grace period, which also takes background
children that ignore SIGTERM or outlive the shell.

A child that left the group (`setsid`, a daemonizing double fork) is hunted
best-effort: each run carries a random token in its environment, and on Linux
every process whose /proc/<pid>/environ still holds it is signalled too. A
process that rewrote or dropped its environment (`env -i`, sudo) escapes; so
does anything handed to another supervisor (docker run, systemd-run).

A hook that exits on time leaves its background children running: the
reference's fake-API-server pattern (start in before_all, stop in after_all)
depends on it.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agent_eval_sandbox.lifecycle.model import CommandOutcome
from agent_eval_sandbox.lifecycle.outputs import (
    HookOutputsError,
    OutputsFile,
    combine_outputs,
    take_hook_outputs,
)

TOKEN_VAR = "AGENT_EVAL_HOOK_TOKEN"
DEFAULT_KILL_GRACE_S = 5.0
# After SIGKILL, how long to wait for the group to be reaped before moving on.
_REAP_WAIT_S = 2.0
_POLL_S = 0.05


def run_on_host(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: BinaryIO,
    timeout_s: float,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
) -> CommandOutcome:
    """Run `bash -c command` with stdout and stderr to `log`; wait at most `timeout_s`."""
    token = secrets.token_hex(16)
    try:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env={**env, TOKEN_VAR: token},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return CommandOutcome(exit_code=None, error=f"could not start bash in {cwd}: {exc.strerror}")
    ended = False
    try:
        code = proc.wait(timeout=timeout_s)
        ended = True
    except subprocess.TimeoutExpired:
        return CommandOutcome(exit_code=None, timed_out=True)
    finally:
        # Also on KeyboardInterrupt: the hook's session gets no Ctrl-C of its own.
        if not ended:
            _terminate(proc, token, kill_grace_s)
    # Popen reports death by signal n as -n; shells and Docker say 128+n.
    return CommandOutcome(exit_code=128 - code if code < 0 else code)


def _terminate(proc: subprocess.Popen[bytes], token: str, grace_s: float) -> None:
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, _REAP_WAIT_S)):
        _signal_group(proc.pid, sig)
        for pid in stragglers(proc.pid, token) or ():
            _signal_pid(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader, so it stops counting as a member
            if not _anything_left(proc.pid, token):
                break
            time.sleep(_POLL_S)
    proc.wait()


def _anything_left(pgid: int, token: str) -> bool:
    found = stragglers(pgid, token)
    if found is not None:
        return bool(found)
    # No /proc: ask the kernel about the group; zombies count, escapees are not seen.
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stragglers(pgid: int, token: str) -> list[int] | None:
    """Live processes of the hook: in its process group, or carrying its token.

    Zombies are left out: they are dead, and where PID 1 does not reap
    orphans they would never go away. None when there is no /proc.
    """
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return None
    with entries:
        for entry in entries:
            if entry.name.isdigit() and _belongs(entry.name, pgid, needle):
                found.append(int(entry.name))
    return found


def _belongs(pid: str, pgid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            fields = handle.read().rpartition(b")")[2].split()
        if fields[0] == b"Z":
            return False
        if int(fields[2]) == pgid:
            return True
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return needle in handle.read().split(b"\0")
    except (OSError, IndexError, ValueError):
        return False  # gone meanwhile, or not ours to read


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class HostExecutor:
    """Runs a phase's host-scope hooks in `cwd`; collects outputs from `outputs_dirs`."""

    cwd: Path
    env: Mapping[str, str]
    outputs_dirs: Sequence[Path]
    kill_grace_s: float = DEFAULT_KILL_GRACE_S

    def run(self, command: str, *, timeout_s: float, log: BinaryIO) -> CommandOutcome:
        return run_on_host(
            command, cwd=self.cwd, env=self.env, log=log, timeout_s=timeout_s, kill_grace_s=self.kill_grace_s
        )

    def take_outputs(self) -> OutputsFile | None:
        # Every directory is emptied even when one of them holds a refused file.
        files: list[OutputsFile] = []
        failures: list[HookOutputsError] = []
        for directory in self.outputs_dirs:
            try:
                found = take_hook_outputs(directory)
            except HookOutputsError as exc:
                failures.append(exc)
                continue
            if found is not None:
                files.append(found)
        if failures:
            raise failures[0]
        return combine_outputs(files)
