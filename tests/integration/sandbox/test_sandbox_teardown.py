"""Nothing leaks: a signalled controller cleans up at once; a killed one is reaped later."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.base import SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.docker_sandbox import remove_container
from agent_eval_sandbox.sandbox.held_dirs import sweep_abandoned
from tests.docker_objects import objects_of_run

pytestmark = pytest.mark.docker

CONTROLLER = Path(__file__).with_name("controller.py")
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def controller_tmp() -> Iterator[Path]:
    """The stand-in's TMPDIR, where its sandboxes' own host directories (their /etc/hosts) go."""
    path = Path(tempfile.mkdtemp(prefix="td-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_controller(run_id: str, image: str, tmp: Path, count: int = 2) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(CONTROLLER), run_id, image, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "ready\n", proc.stderr.read() if proc.stderr else line
    return proc


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_removes_the_runs_containers_and_volumes_within_seconds(backend, sandbox_image, run_id, sig, code,
                                                                         controller_tmp):
    proc = start_controller(run_id, sandbox_image, controller_tmp)
    try:
        assert len(objects_of_run(run_id)) == 2 + 4  # two containers, two volumes each
        assert len(list(controller_tmp.glob("aes-etc-*.lock"))) == 2  # a held host directory each
        started = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
        assert time.monotonic() - started < 10
        assert objects_of_run(run_id) == []
        assert list(controller_tmp.iterdir()) == []
    finally:
        proc.kill()
        proc.wait()


def test_kill_9_leaves_orphans_that_the_next_reap_removes(backend, sandbox_image, run_id, make_sandbox,
                                                          controller_tmp):
    alive = make_sandbox("mine-and-alive")  # owned by this live process: must survive the reap
    proc = start_controller(run_id, sandbox_image, controller_tmp)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    orphans = [item for item in objects_of_run(run_id) if "mine-and-alive" not in item]
    assert len(orphans) == 2 + 4

    removed = [r for r in backend.reap_orphans() if r.run_id == run_id]
    assert sorted(r.kind for r in removed) == ["container"] * 2 + ["volume"] * 4
    assert all(r.reason == f"owner process {proc.pid} on {L.current_owner().host} is gone" for r in removed)
    assert {r.case_id for r in removed} == {"case-0", "case-1"}
    remaining = objects_of_run(run_id)
    assert len(remaining) == 3 and all("mine-and-alive" in item for item in remaining)
    assert alive.exec(["true"]).ok
    assert [r for r in backend.gc() if r.run_id == run_id] == []  # gc without --all = reap: nothing more
    # its sandboxes' two host directories stay, abandoned: the sweep of gc and of a run's start takes them
    host_dirs = sorted(controller_tmp.glob("aes-etc-*[!k]"))
    assert len(host_dirs) == 2 and sorted(sweep_abandoned([controller_tmp])) == host_dirs
    assert list(controller_tmp.iterdir()) == []


def test_a_killed_controllers_sandboxes_stop_by_themselves(backend, sandbox_image, run_id, controller_tmp):
    """kill -9 leaves no teardown at all: the kernel closes each sandbox's lifeline (the stream on its main
    process's stdin), that process reads its end and the container stops, ending the agent's processes,
    before any reaper runs."""
    proc = start_controller(run_id, sandbox_image, controller_tmp)
    api = backend.client.api
    containers = api.containers(filters={"label": f"{L.RUN_ID}={run_id}"})
    assert len(containers) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    killed = time.monotonic()
    while time.monotonic() - killed < 15:
        states = [api.inspect_container(c["Id"])["State"] for c in containers]
        if not any(state["Running"] for state in states):
            break
        time.sleep(0.1)
    assert not any(state["Running"] for state in states), states
    stopped_after = time.monotonic() - killed
    assert stopped_after < 10, stopped_after
    removed = [r for r in backend.reap_orphans() if r.run_id == run_id]
    assert sorted(r.kind for r in removed) == ["container"] * 2 + ["volume"] * 4


def test_objects_long_past_their_deadline_are_reaped_whoever_owns_them(backend, sandbox_image, run_id):
    stale = backend.create(SandboxSpec(sandbox_image, run_id, "stale", deadline_epoch=time.time() - 3600))
    removed = [r for r in backend.reap_orphans() if r.run_id == run_id]
    assert sorted(r.kind for r in removed) == ["container", "volume", "volume"]
    assert all(r.reason.startswith("deadline passed") for r in removed)
    assert objects_of_run(run_id) == []
    stale.destroy()  # still idempotent after someone else removed it


@pytest.mark.parametrize("frozen", [False, True], ids=["running", "frozen"])
def test_a_destroyed_sandbox_takes_its_volumes_with_it(make_sandbox, run_id, frozen):
    """Its workspace and $HOME are volumes the daemon made with the container; under runc a frozen
    (paused) one is removed without being resumed first."""
    sandbox = make_sandbox("destroyed")
    sandbox.exec(["sh", "-c", "echo kept > /workspace/f && echo kept > $HOME/f"])
    if frozen:
        sandbox.freeze()
    assert sorted(item.split()[0] for item in objects_of_run(run_id)) == ["container", "volume", "volume"]
    started = time.monotonic()
    sandbox.destroy()
    assert time.monotonic() - started < 5
    assert objects_of_run(run_id) == []


def test_a_container_removed_by_two_callers_at_once_raises_for_neither(backend, make_sandbox, run_id):
    """A SIGTERM's teardown racing a case's own destroy (the fifteenth round's SIGTERM 8 s in): the
    daemon answers the second remover 409 "removal already in progress"; that is not a failure (it
    printed a warning that the removal had failed)."""
    outcomes = []
    for n in range(4):
        sandbox = make_sandbox(f"race-{n}")
        failures: list[str] = []

        def remove(sandbox=sandbox, failures=failures) -> None:
            try:
                remove_container(backend.client.api, sandbox.container_id, on_host_kernel=True)
            except SandboxError as exc:
                failures.append(str(exc))

        threads = [threading.Thread(target=remove) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        outcomes.append(failures)
    assert outcomes == [[], [], [], []]
    assert objects_of_run(run_id) == []
