"""A fork bomb and a memory hog end only their own sandbox, and say so; a neighbour runs on."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from agent_eval_sandbox.sandbox import docker_sandbox
from agent_eval_sandbox.sandbox.base import EndReason, ExecResult, Limits, SandboxError

pytestmark = pytest.mark.docker

MiB = 1024 * 1024

# The neighbour's work needs processes and memory of its own while the others misbehave.
NEIGHBOUR = (
    "import subprocess, hashlib\n"
    "outs = [subprocess.run(['sh', '-c', 'echo $$'], capture_output=True).returncode for _ in range(30)]\n"
    "data = bytearray(64 * 1024 * 1024)\n"
    "print(sum(outs), hashlib.sha256(bytes(data)).hexdigest()[:8], flush=True)\n"
)


def test_bomb_and_hog_are_contained_and_classified(make_sandbox):
    bomb = make_sandbox("bomb", limits=Limits(pids=64, memory_bytes=512 * MiB))
    hog = make_sandbox("hog", limits=Limits(memory_bytes=128 * MiB))
    neighbour = make_sandbox("neighbour", limits=Limits(pids=128, memory_bytes=512 * MiB))
    results: dict[str, ExecResult] = {}

    def run(name, sandbox, cmd):
        results[name] = sandbox.exec(cmd, timeout=60)

    threads = [
        threading.Thread(target=run, args=("bomb", bomb, ["bash", "-c", ":(){ :|:& };:"])),
        threading.Thread(
            target=run,
            args=("hog", hog, ["python3", "-c", "b = bytearray()\nwhile True: b.extend(b'x' * 2**20)"]),
        ),
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # let the bomb and the hog get going before the neighbour starts
    run("neighbour", neighbour, ["python3", "-c", NEIGHBOUR])
    for thread in threads:
        thread.join(timeout=90)

    assert results["bomb"].pids_limit_hit is True, results["bomb"]
    assert results["bomb"].end_reason is not EndReason.TIMED_OUT

    hog_result = results["hog"]
    assert hog_result.end_reason is EndReason.OOM_KILLED, hog_result
    assert hog_result.exit_code == 137 and hog_result.signal == 9 and hog_result.oom_kills == 1
    assert hog_result.pids_limit_hit is False

    calm = results["neighbour"]
    assert calm.ok and calm.oom_kills == 0 and calm.pids_limit_hit is False, calm
    assert calm.stdout == b"0 3b6a07d0\n"  # sha256 of 64 MiB of zeros

    # Only the offending processes died: each sandbox still takes commands.
    assert hog.exec(["true"]).ok
    assert neighbour.exec(["true"]).ok
    assert subprocess.run(["true"]).returncode == 0  # and the host can still fork

    started = time.monotonic()
    bomb.destroy()
    assert time.monotonic() - started < 10


def test_a_lasting_fork_bomb_is_frozen_at_the_deadline(make_sandbox):
    bomb = make_sandbox("lasting-bomb", limits=Limits(pids=32))
    keeps_forking = "import os, time\nwhile True:\n    try: os.fork()\n    except OSError: time.sleep(0.05)\n"
    result = bomb.exec(["python3", "-c", keeps_forking], timeout=4)
    assert result.end_reason is EndReason.TIMED_OUT
    assert result.pids_limit_hit is True
    assert result.duration_s < 4 + 5
    assert bomb.frozen


def test_the_counters_read_on_the_host_are_the_ones_the_sandbox_sees(make_sandbox):
    """Under runc the counters come from the host's cgroup files (no exec after each command): they
    must be the very counters the probe reads inside — here, after an OOM kill and a refused fork."""
    box = make_sandbox("counters", limits=Limits(pids=32, memory_bytes=128 * MiB))
    hog = box.exec(["python3", "-c", "b = bytearray()\nwhile True: b.extend(b'x' * 2**20)"], timeout=60)
    forks = box.exec(["python3", "-c", "import os\nfor _ in range(64):\n  try: os.fork() or os._exit(0)\n"
                      "  except OSError: pass\n"], timeout=60)
    on_host = box._host_counters()
    inside = box._probe_inside(attempts=3)
    assert on_host is not None, "this host shows runc containers' cgroups under a known layout"
    assert on_host == inside and on_host.oom_kills == 1 and on_host.pids_refused >= 1, (on_host, inside)
    assert hog.end_reason is EndReason.OOM_KILLED and forks.pids_limit_hit is True


def test_a_sandbox_stopped_under_its_command_is_an_error_not_the_commands_exit(make_sandbox, backend):
    sandbox = make_sandbox("stopped")
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = sandbox.exec(["sleep", "60"], timeout=60)
        except SandboxError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)
    # What gVisor does to a sandbox whose memory runs out, done by hand: the whole container goes.
    backend.client.api.kill(sandbox.container_id)
    thread.join(timeout=60)
    error = outcome.get("error")
    assert isinstance(error, SandboxError), outcome  # not a command that "exited 137" by itself
    assert "stopped while a command ran or as it ended (its container ended with exit code 137)" in str(error), error


def test_the_hosts_own_short_commands_never_wait_for_good(make_sandbox, backend, monkeypatch):
    """docker-py reads an exec's output with no timeout; under gVisor a sandbox dying as the host's
    counters' probe started left that read waiting for good (red team): the case never ended."""
    monkeypatch.setattr(docker_sandbox, "_BRIEF_EXEC_S", 1.0)
    sandbox = make_sandbox("brief")
    stuck = backend.client.api.exec_create(sandbox.container_id, ["sleep", "30"])["Id"]
    started = time.monotonic()
    with pytest.raises(SandboxError, match="had not ended after 1s"):
        sandbox._brief_output(stuck, "a stuck command")
    assert time.monotonic() - started < 8
