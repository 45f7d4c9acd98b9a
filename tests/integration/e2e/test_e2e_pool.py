"""A run with a warm pool, interrupted: Ctrl-C leaves nothing behind; after kill -9 the pool's
sandboxes stop by themselves, the next run reaps them and `gc` removes the host directories the
killed run left (never those of a live run).

The real CLI runs a case that sleeps, at parallelism 1: while it runs, the
pool has made the next case's sandbox (labelled, running, idle). The run's
temp directory is one of the test's own and every directory its containers
mount is looked at, so every staging and sandbox host directory the run made is
the test's to check (under the temp directory, or — a controller in a
container — under the runs directory).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.docker_errors import connect

pytestmark = pytest.mark.docker

SLEEPER = [{"tool": "Bash", "input": {"command": "echo started; sleep 600", "timeout": 600_000}}, {"text": "never"}]


@pytest.fixture
def run_tmp() -> Iterator[Path]:
    """The run's TMPDIR: short, for the unix socket paths under it."""
    path = Path(tempfile.mkdtemp(prefix="aes-pool-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _objects(run_id: str) -> list[dict]:
    api = connect().api
    label = {"label": f"{L.RUN_ID}={run_id}"}
    return api.containers(all=True, filters=label) + (api.volumes(filters=label).get("Volumes") or [])


def _wait_for(condition, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)


def _start_warm_run(project, run_tmp: Path, run_id: str) -> tuple[subprocess.Popen[str], list[dict]]:
    """A run whose first case sleeps while the pool holds the second case's sandbox; both containers."""
    project.eval_yaml("""
        name: warm-pool
        execution: {prompt: "case {who}", timeout: 900, parallelism: 1}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
    """)
    for who in ("c1", "c2", "c3"):
        project.case(who, {"who": who}, script=SLEEPER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["TMPDIR"] = str(run_tmp)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline", "--json",
         "--runs-dir", str(project.runs), "--run-id", run_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project.root,
    )
    api = connect().api
    stdout_log = project.runs / "warm-pool" / run_id / "cases" / "c1" / "stdout.log"

    def warm() -> list[dict] | None:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        containers = api.containers(filters={"label": f"{L.RUN_ID}={run_id}"})
        cases = {c["Labels"][L.CASE_ID] for c in containers}
        running = stdout_log.exists() and "started" in stdout_log.read_text(errors="replace")
        return containers if running and cases == {"c1", "c2"} else None

    containers = _wait_for(warm, "c1 sleeping while the pool holds c2's sandbox")
    return proc, containers


def _host_dirs(containers: list[dict]) -> list[Path]:
    """The host directories the run's containers mount: their /etc/hosts, channel directories."""
    api = connect().api
    dirs = []
    for container in containers:
        for mount in api.inspect_container(container["Id"])["Mounts"]:
            if mount["Type"] == "bind":
                dirs.append(Path(mount["Source"]))
    return dirs


def _gc(project, run_tmp: Path) -> list[dict]:
    """`agent-eval-sandbox gc --json` looking where the run put its directories."""
    env = {**os.environ, "TMPDIR": str(run_tmp), "AGENT_EVAL_RUNS_DIR": str(project.runs)}
    done = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "gc", "--json"], capture_output=True,
                          text=True, env=env, cwd=project.root, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _made_dirs(project, run_tmp: Path) -> set[Path]:
    """The held directories (staging, each sandbox's host files) a run made, with a lock file beside each."""
    return {lock.with_suffix("") for base in (run_tmp, project.runs) for lock in base.glob("aes*.lock")}


def test_ctrl_c_with_a_warm_pool_leaves_nothing_behind(project, run_tmp):
    run_id = f"pool-int-{os.getpid()}-{int(time.time())}"
    proc, containers = _start_warm_run(project, run_tmp, run_id)
    try:
        mounted = _host_dirs(containers)
        # the run's own directories: under its temp directory, or (a controller in a container) its runs directory
        assert mounted and all(path.is_relative_to(run_tmp) or path.is_relative_to(project.runs) for path in mounted)
        # c2's sandbox was made ahead with its case's channel directory, still empty of its data
        pooled = next(c for c in containers if c["Labels"][L.CASE_ID] == "c2")
        channel = next(Path(m["Source"]) for m in connect().api.inspect_container(pooled["Id"])["Mounts"]
                       if m["Destination"] == "/run/agent-eval")
        assert list(channel.iterdir()) == []
        # gc while the run lives: its directories are held, so none is taken
        made = _made_dirs(project, run_tmp)
        assert len(made) >= 3  # the staging directory and a host directory per sandbox
        assert [r for r in _gc(project, run_tmp) if r["kind"] == "directory"] == []
        assert all(path.is_dir() for path in made)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _objects(run_id) == []
    assert [path for path in mounted if path.exists()] == []
    assert list(run_tmp.iterdir()) == []  # no staging, no sandbox's host directory


def test_kill_9_with_a_warm_pool_its_sandboxes_stop_and_the_next_run_reaps_them(project, run_tmp):
    run_id = f"pool-k9-{os.getpid()}-{int(time.time())}"
    proc, containers = _start_warm_run(project, run_tmp, run_id)
    api = connect().api
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    proc.communicate()

    def all_stopped() -> bool:
        return not any(api.inspect_container(c["Id"])["State"]["Running"] for c in containers)

    _wait_for(all_stopped, "the pool's and the case's sandboxes stopped (lifeline)", timeout=15)
    # Everything is still there, owned by a dead process: the next run's reaper removes it.
    assert {c["Labels"][L.CASE_ID] for c in api.containers(all=True, filters={"label": f"{L.RUN_ID}={run_id}"})} \
        == {"c1", "c2"}
    removed = [r for r in DockerBackend().reap_orphans() if r.run_id == run_id]
    assert sorted(r.case_id for r in removed if r.kind == "container") == ["c1", "c2"]
    assert all(r.reason.startswith(f"owner process {proc.pid} ") for r in removed)
    assert _objects(run_id) == []
    # SIGKILL ran no exit handler: the staging and sandbox host directories are still there; gc removes them
    left = _made_dirs(project, run_tmp)
    assert len(left) >= 3 and all(path.is_dir() for path in left)
    swept = [r for r in _gc(project, run_tmp) if r["kind"] == "directory"]
    assert {Path(r["name"]) for r in swept} == left
    assert all(r["reason"] == "the process that made it is gone" for r in swept)
    assert list(run_tmp.iterdir()) == []
