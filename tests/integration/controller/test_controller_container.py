"""The controller as a container against this machine's daemon: the same results as on the host, and the
same cleanup (docker stop, docker kill + gc), with the host's paths reached through its own mounts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path, PurePosixPath

import pytest
import yaml

from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.docker_host import probe_visible
from agent_eval_sandbox.sandbox.held_dirs import lock_path_of, sweep_abandoned
from agent_eval_sandbox.sandbox.host_paths import HostPaths, MountMap, SharedDirError
from tests.integration.controller.conftest import (
    SOCKET,
    controller_user,
    docker,
    give_to,
    leftovers,
    run_args,
    sandboxes_of,
)

pytestmark = pytest.mark.docker


def host_run(project: Path, run_id: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "run", "eval.yaml", "--offline", "--json",
                           "--run-id", run_id], cwd=project, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def verdicts(output: dict) -> dict:
    """What must not depend on where the controller runs: how each case ended, what each judge said."""
    run_dir = Path(output["run_dir"])
    if not run_dir.is_absolute():
        run_dir = Path(output["cwd"]) / run_dir
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    cases = output["run_result"]["per_case"]
    return {
        "ended": {cid: (c["end_reason"], c["exit_code"], c["num_turns"], c["changes"]["added"],
                        c["changes"]["modified"]) for cid, c in cases.items()},
        "judges": {cid: {j: (v["value"], v["status"]) for j, v in per.items()}
                   for cid, per in summary["per_case"].items()},
        "artifacts": {p.relative_to(run_dir).as_posix(): p.read_text()
                      for p in sorted((run_dir / "cases").glob("*/artifacts/*"))},
        "exit": output["score"]["exit_code"] if "exit_code" in output["score"] else None,
    }


def test_quickstart_through_the_controller_image_matches_a_host_run(controller_image, quickstart_copy, warm_cache,
                                                                    tmp_path):
    """README's command, as the image's non-root user with the socket's group: same verdicts as the host."""
    user, extra = controller_user()
    give_to(quickstart_copy, user)
    give_to(warm_cache, user)
    proc = subprocess.run([*run_args(controller_image, quickstart_copy, warm_cache, user=user, extra=extra),
                           "run", "eval.yaml", "--offline", "--json", "--run-id", "in-container"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    in_container = {**json.loads(proc.stdout), "cwd": str(quickstart_copy)}
    run_dir = quickstart_copy / "eval" / "runs" / "quickstart" / "in-container"
    assert (run_dir / "report.html").is_file() and (run_dir / "junit.xml").is_file()
    # The run's files are the caller's (--user), and the staging it made under the runs dir is gone.
    assert run_dir.stat().st_uid == int(user.split(":")[0])
    assert not [p for p in (quickstart_copy / "eval" / "runs").iterdir() if p.name.startswith(("aes-", ".aes-"))]

    host_project = tmp_path / "host"
    subprocess.run(["cp", "-a", str(quickstart_copy), str(host_project)], check=True)
    subprocess.run(["rm", "-rf", str(host_project / "eval")], check=True)
    on_host = {**host_run(host_project, "on-host"), "cwd": str(host_project)}

    assert verdicts(in_container) == verdicts(on_host)
    assert all(e[0] == "exited" and e[1] == 0 for e in verdicts(on_host)["ended"].values())
    assert leftovers("in-container") == [] and leftovers("on-host") == []


SLOW_EVAL = """
    name: slow
    execution: {mode: case, prompt: "wait", timeout: 300, max_budget_usd: 5, parallelism: 2}
    models: {skill: claude-sonnet-4-6}
    runner: {permission_mode: bypassPermissions}
    dataset: {path: cases}
    judges:
      - name: ok
        check: "return True, 'ok'"
"""


def slow_project(root: Path) -> Path:
    """Two cases whose agent sleeps: the run is certainly mid-case when it is stopped."""
    (root / "eval.yaml").parent.mkdir(parents=True, exist_ok=True)
    (root / "eval.yaml").write_text(textwrap.dedent(SLOW_EVAL))
    for case in ("c1", "c2"):
        (root / "cases" / case).mkdir(parents=True)
        (root / "cases" / case / "input.yaml").write_text("x: 1\n")
        (root / "cases" / case / "model_script.yaml").write_text(yaml.safe_dump(
            # Not a bare `sleep`: Claude Code's Bash tool turns a long one down at once, and the case would end.
            [{"tool": "Bash", "input": {"command": "tail -f /dev/null"}}, {"text": "done"}]))
    return root


def start_slow_run(image: str, project: Path, cache: Path, run_id: str, name: str) -> None:
    user, extra = controller_user()
    give_to(project, user)
    give_to(cache, user)
    docker(*run_args(image, project, cache, user=user, extra=extra, detached_name=name)[1:],
           "run", "eval.yaml", "--offline", "--run-id", run_id)
    deadline = time.monotonic() + 120
    while len(sandboxes_of(run_id)) < 2:
        state = docker("inspect", "--format", "{{.State.Running}}", name, check=False).stdout.strip()
        assert state == "true", docker("logs", name, check=False).stderr[-3000:]
        assert time.monotonic() < deadline, "the sandboxes never started"
        time.sleep(0.5)
    time.sleep(1.0)  # the agents are in their `sleep`


def test_docker_stop_mid_run_removes_every_sandbox_of_the_run(controller_image, warm_cache, tmp_path):
    project = slow_project(tmp_path / "slow")
    name = f"aes-ctl-stop-{os.getpid()}"
    run_id = f"stopped-{os.getpid()}"  # another session running this test at once has its own
    try:  # the controller container is kept after it exits (its exit code is read): removed whatever fails
        start_slow_run(controller_image, project, warm_cache, run_id, name)
        docker("stop", name)  # SIGTERM to the controller (under --init), SIGKILL after 10 s
        state = docker("inspect", "--format", "{{.State.ExitCode}}", name, check=False)
        logs = docker("logs", name, check=False)
        assert state.stdout.strip() == "143", logs.stderr[-3000:]
    finally:
        docker("rm", "-f", name, check=False)
    assert leftovers(run_id) == []


def test_a_killed_controller_container_leaves_orphans_that_any_reaper_removes(controller_image, warm_cache,
                                                                              tmp_path):
    """SIGKILL gives no chance to clean up: the sandboxes stop (the kernel closed their lifelines), and a reaper on the
    host, which shares no pid namespace with the dead controller, removes them by its container's absence."""
    project = slow_project(tmp_path / "slow")
    name = f"aes-ctl-kill-{os.getpid()}"
    run_id = f"killed-{os.getpid()}"
    try:  # the controller container is kept after it exits: removed whatever fails
        start_slow_run(controller_image, project, warm_cache, run_id, name)
        own = docker("inspect", "--format", "{{.Id}}", name).stdout.strip()
        labels = json.loads(docker("inspect", "--format", "{{json .Config.Labels}}", sandboxes_of(run_id)[0]).stdout)
        assert labels["agent-eval-sandbox.controller-container"] == own
        docker("kill", name)
        deadline = time.monotonic() + 60
        while sandboxes_of(run_id):  # the lifeline: no controller, no running sandbox
            assert time.monotonic() < deadline, "sandboxes outlived their controller"
            time.sleep(0.5)
        assert leftovers(run_id), "the sandboxes were removed by no one: nothing left to reap"
    finally:
        docker("rm", "-f", name, check=False)
    gc = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "gc", "--json"], capture_output=True,
                        text=True, timeout=300)
    assert gc.returncode == 0, gc.stderr
    removed = [r for r in json.loads(gc.stdout) if r["run_id"] == run_id]
    assert removed and all(r["reason"] == f"controller container {own[:12]} is gone" for r in removed)
    assert leftovers(run_id) == []


def test_without_a_shared_directory_the_run_stops_at_once_with_the_mount_to_add(controller_image, quickstart_copy,
                                                                                warm_cache):
    """The project is only inside the controller's container: the daemon cannot mount anything from it."""
    user, extra = controller_user()
    give_to(warm_cache, user)
    proc = subprocess.run(["docker", "run", "--rm", "--init", "--user", user, *extra, "-v", f"{SOCKET}:{SOCKET}",
                           "-v", f"{quickstart_copy}:/src:ro", "-v", f"{warm_cache}:/cache", "--entrypoint", "sh",
                           controller_image, "-c",
                           "cp -r /src /tmp/p && cd /tmp/p && "
                           "exec agent-eval-sandbox run eval.yaml --offline --run-id no-shared-dir"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    # the progress before the first case (the image check) may come first; the refusal is one line
    lines = [line for line in proc.stderr.strip().splitlines()
             if not line.startswith(("sandbox image:", "checking that the sandboxes can mount"))]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot see /tmp/p/eval/runs" in lines[0] and "-v /tmp/p/eval/runs:/tmp/p/eval/runs" in lines[0]
    assert leftovers("no-shared-dir") == []


def test_the_probe_tells_the_same_directory_from_a_namesake(sandbox_image, tmp_path):
    """Where the daemon does not know the controller's container (another engine's, a pod), only the marker
    file decides: a directory by another name, or none at all, must not pass for the shared one."""
    ours, other = tmp_path / "ours", tmp_path / "other"
    other.mkdir()
    backend = DockerBackend()
    owner = L.current_owner()
    api = backend.client.api
    assert probe_visible(api, sandbox_image, ours, ours, owner, None) is None
    assert probe_visible(api, sandbox_image, ours, other, owner, None) == f"the daemon's {other} is another directory"
    missing = tmp_path / "missing"
    assert probe_visible(api, sandbox_image, ours, missing, owner, None) == \
        f"{missing} does not exist on the daemon's machine"
    assert list(ours.iterdir()) == []  # the marker is gone
    with pytest.raises(SharedDirError, match=f"cannot see {ours}"):
        backend.check_host_paths(HostPaths(ours, (MountMap(PurePosixPath(ours), PurePosixPath(other)),),
                                           in_container=True), sandbox_image)
    backend.check_host_paths(HostPaths(ours, in_container=True), sandbox_image)
    assert leftovers("probe") == []


def test_the_probe_s_marker_is_held_while_the_daemon_reads_it(sandbox_image, tmp_path):
    """A controller killed mid-probe leaves its marker to the next sweep: while the daemon reads it, the
    marker is a held directory that a sweep keeps; once the lock's holder is gone, a sweep removes it."""
    ours = tmp_path / "ours"
    api = DockerBackend().client.api
    seen: dict[str, object] = {}

    class Spy:
        def __getattr__(self, name):
            return getattr(api, name)

        def get_archive(self, container, path, **kwargs):
            seen["entries"] = sorted(entry.name for entry in ours.iterdir())
            seen["swept"] = sweep_abandoned([ours])
            # As a kill -9 would leave it: the lock file without its holder, the marker beside it.
            marker = next(entry for entry in ours.iterdir() if not entry.name.endswith(".lock"))
            leftover = tmp_path / "leftover"
            shutil.copytree(marker, leftover / marker.name)
            shutil.copy(lock_path_of(marker), leftover / lock_path_of(marker).name)
            seen["leftover"] = leftover
            return api.get_archive(container, path, **kwargs)

    assert probe_visible(Spy(), sandbox_image, ours, ours, L.current_owner(), None) is None
    marker_name = seen["entries"][0]
    assert re.fullmatch(r"aes-probe-[0-9a-f]{8}", marker_name) and seen["entries"] == [marker_name,
                                                                                      marker_name + ".lock"]
    assert seen["swept"] == []
    assert list(ours.iterdir()) == []
    leftover = seen["leftover"]
    assert sweep_abandoned([leftover]) == [leftover / marker_name]
    assert list(leftover.iterdir()) == []
    assert leftovers("probe") == []


def test_sigterm_ends_the_controller_as_pid_1_without_init(controller_image, tmp_path):
    """`docker run` without --init: the kernel drops a SIGTERM pid 1 has no handler for."""
    script = tmp_path / "script.yaml"
    script.write_text("- text: hi\n")
    name = f"aes-ctl-pid1-{os.getpid()}"
    docker("run", "-d", "--name", name, "-v", f"{script}:/script.yaml:ro", controller_image, "model-server",
           "/script.yaml", "--port", "0")
    try:
        deadline = time.monotonic() + 60
        while "scripted model server" not in docker("logs", name, check=False).stderr:
            assert time.monotonic() < deadline, docker("logs", name, check=False).stderr
            time.sleep(0.3)
        docker("stop", "--time", "60", name)
        assert docker("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "143"
    finally:
        docker("rm", "-f", name, check=False)


def test_the_controller_builds_a_sandbox_image_from_the_context_in_its_installed_package(controller_image,
                                                                                          tmp_path):
    """`image build` from inside the container, through the host's daemon. The CLI binary is a stand-in
    (its bytes name the image): this machine's containers reach no npm registry to fetch the real one, and
    a build of the real one would only re-tag the image every other test uses."""
    user, extra = controller_user()
    cache = tmp_path / "cache"
    cache.mkdir()
    stand_in = cache / "claude"
    stand_in.write_text(f"#!/bin/sh\necho stand-in {os.getpid()} {time.time()}\n")
    stand_in.chmod(0o755)
    give_to(cache, user)
    proc = subprocess.run(["docker", "run", "--rm", "--init", "--user", user, *extra, "-v", f"{SOCKET}:{SOCKET}",
                           "-v", f"{cache}:/cache", "-e", "AGENT_EVAL_CLAUDE_BINARY=/cache/claude", controller_image,
                           "image", "build", "--quiet"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = proc.stdout.strip()
    try:
        assert ref.startswith("agent-eval-sandbox:")
        labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", ref).stdout)
        assert labels["agent-eval-sandbox.image"] == "sandbox"
        listing = docker("run", "--rm", "--network", "none", ref, "ls", "/opt/agent-eval").stdout.split()
        assert {"run_agent.py", "hook_client.py", "paths.py"} <= set(listing)
    finally:
        docker("rmi", "-f", ref, check=False)
