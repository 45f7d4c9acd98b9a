"""The launcher on standby (`inside/standby.py`): started with the sandbox, handed its case's agent once.

The agent's exec must be the standby process itself (that is the time it
saves), with the case's environment and directory; it is used once, so no
launcher is left waiting while the agent runs; a command that is not the
launcher does not consume it; a standby that died is replaced by a plain exec.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.sandbox.base import BindMount, SandboxSpec
from agent_eval_sandbox.sandbox.docker_sandbox import DockerSandbox

pytestmark = pytest.mark.docker

# The launcher's child reports who started it and what it was given.
REPORT = 'echo "ppid=$PPID foo=$FOO cwd=$(pwd)"; echo prompt=$(cat)'
WAITING = "ps -eo pid=,args= | grep -F -- '--standby' | grep -v grep || true"


@pytest.fixture
def channel() -> Iterator[Path]:
    """A case's channel directory: a gateway socket that takes connections, and a prompt."""
    path = Path(tempfile.mkdtemp(prefix="aes-sb-", dir="/tmp"))
    os.chmod(path, 0o755)
    (path / paths.PROMPT_FILE_NAME).write_text("the-prompt\n")
    os.chmod(path / paths.PROMPT_FILE_NAME, 0o644)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path / paths.GATEWAY_SOCKET_NAME))
    os.chmod(path / paths.GATEWAY_SOCKET_NAME, 0o777)
    server.listen(16)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield path
    server.close()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make(backend, sandbox_image: str, run_id: str, channel: Path):
    def make_one(case_id: str, standby: tuple[str, ...] = ac.launcher_command()) -> DockerSandbox:
        spec = SandboxSpec(image=sandbox_image, run_id=run_id, case_id=case_id, deadline_epoch=time.time() + 600,
                           mounts=(BindMount(channel, paths.RUN_DIR),), standby=standby)
        return backend.create(spec)

    return make_one


def launch(sandbox: DockerSandbox, command: str = REPORT, **kwargs):
    argv = ac.launcher_argv(["sh", "-c", command])
    return sandbox.exec(argv, env={"FOO": "from-the-case"}, cwd="/tmp", timeout=60, **kwargs)


def standby_pids(sandbox: DockerSandbox) -> list[int]:
    listing = sandbox.exec(["sh", "-c", WAITING], timeout=30).stdout or b""
    return [int(line.split()[0]) for line in listing.decode().splitlines() if line.strip()]


def report_of(result) -> dict[str, str]:
    assert result.exit_code == 0, result
    return dict(part.split("=", 1) for line in result.stdout.decode().splitlines() for part in line.split(" "))


def test_the_agent_is_handed_to_the_waiting_launcher_once_with_its_env_and_directory(make):
    sandbox = make("once")
    waiting = standby_pids(sandbox)
    assert len(waiting) == 1, "the sandbox has no launcher on standby"

    first = report_of(launch(sandbox))
    assert int(first["ppid"]) == waiting[0], "the agent was not started by the launcher on standby"
    assert first["foo"] == "from-the-case" and first["cwd"] == "/tmp" and first["prompt"] == "the-prompt"
    assert standby_pids(sandbox) == [], "a launcher is still waiting after the agent's start"

    second = report_of(launch(sandbox))
    assert int(second["ppid"]) != waiting[0] and second["foo"] == "from-the-case" and second["cwd"] == "/tmp"


def test_no_launcher_waits_while_the_agent_runs(make):
    """The one it was handed to runs the agent (its parent); no other is left for the agent to talk to."""
    sandbox = make("during")
    result = launch(sandbox, command=f'{{ {WAITING}; }} | grep -v "^ *$PPID " || true')
    assert result.exit_code == 0 and result.stdout == b"", result.stdout


def test_other_commands_leave_the_standby_for_the_agent(make):
    sandbox = make("others")
    waiting = standby_pids(sandbox)
    assert sandbox.exec(["sh", "-c", "echo hook > /workspace/hook.txt"], timeout=30).ok
    assert sandbox.exec(["sh", "-c", "cat"], stdin=b"input", timeout=30).stdout == b"input"
    assert int(report_of(launch(sandbox))["ppid"]) == waiting[0]


def test_a_standby_that_died_is_replaced_by_a_plain_exec(make):
    sandbox = make("died")
    [pid] = standby_pids(sandbox)
    assert sandbox.exec(["kill", "-9", str(pid)], timeout=30).ok
    time.sleep(0.5)
    report = report_of(launch(sandbox))
    assert int(report["ppid"]) != pid and report["foo"] == "from-the-case"


def test_a_spec_without_a_launcher_starts_none(make):
    sandbox = make("none", standby=())
    assert standby_pids(sandbox) == []
    assert report_of(launch(sandbox))["foo"] == "from-the-case"


def test_the_sandbox_user_cannot_reach_the_standby_input(make):
    """Only the controller may write the go line: the launcher is non-dumpable before it reads it,
    so its stdin cannot be opened through /proc by another process of the same user (runc)."""
    sandbox = make("reach")
    [pid] = standby_pids(sandbox)
    probe = sandbox.exec(["sh", "-c", f"echo '{{\"argv\": []}}' > /proc/{pid}/fd/0 && echo WROTE"], timeout=30)
    assert b"WROTE" not in (probe.stdout or b""), "the sandbox user wrote into the launcher's input"
    assert b"Permission denied" in (probe.stderr or b""), probe
    assert int(report_of(launch(sandbox))["ppid"]) == pid
