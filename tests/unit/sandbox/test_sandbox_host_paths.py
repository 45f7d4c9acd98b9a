"""Where sandbox-visible files live and how the daemon names them (no Docker)."""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath

import pytest

from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.host_paths import (
    HostPaths,
    MountMap,
    daemon_path,
    missing_mount_error,
    mounts_of,
    own_container_id,
    remote_daemon,
    remote_daemon_error,
    shared_root,
)

CID = "dbb9e8e39c8e2d886816aecd87f54786eb96767c4a6531e7fdc080683590e6bb"


def mm(inside: str, daemon: str) -> MountMap:
    return MountMap(PurePosixPath(inside), PurePosixPath(daemon))


# ---- translation through the controller's mounts ------------------------------------------


def test_a_path_under_a_mount_is_spelled_as_the_daemon_knows_it():
    mounts = [mm("/builds", "/var/lib/docker/volumes/runner-1/_data"), mm("/work", "/home/ci/work")]
    assert daemon_path(PurePosixPath("/builds/g/p/eval/runs/aes-1/c/run"), mounts) == PurePosixPath(
        "/var/lib/docker/volumes/runner-1/_data/g/p/eval/runs/aes-1/c/run")
    assert daemon_path(PurePosixPath("/work"), mounts) == PurePosixPath("/home/ci/work")


def test_the_deepest_mount_wins_and_prefixes_are_whole_components():
    mounts = [mm("/work", "/a"), mm("/work/runs", "/b")]
    assert daemon_path(PurePosixPath("/work/runs/x"), mounts) == PurePosixPath("/b/x")
    assert daemon_path(PurePosixPath("/work/runsXYZ/x"), mounts) == PurePosixPath("/a/runsXYZ/x")
    assert daemon_path(PurePosixPath("/workspace/x"), mounts) is None
    assert daemon_path(PurePosixPath("/tmp/aes-1"), mounts) is None


def test_host_paths_without_mounts_is_the_identity_and_makes_private_dirs_under_root(tmp_path):
    host = HostPaths(tmp_path / "shared")
    assert host.for_daemon(tmp_path / "x") == tmp_path / "x"
    held = host.temp_dir("aes-")
    made = held.path
    assert made.parent == tmp_path / "shared" and made.name.startswith("aes-") and made.is_dir()
    held.release()
    assert list((tmp_path / "shared").iterdir()) == []


def test_host_paths_translates_what_a_mount_holds_and_leaves_the_rest():
    host = HostPaths(Path("/builds/p/eval/runs"), (mm("/builds", "/var/lib/docker/volumes/v/_data"),), True)
    assert host.for_daemon(Path("/builds/p/eval/runs/aes-1")) == Path("/var/lib/docker/volumes/v/_data/p/eval/runs/aes-1")
    assert host.for_daemon(Path("/etc/x")) == Path("/etc/x")


# ---- finding our own container -------------------------------------------------------------


def mountinfo(root_dir: str) -> str:
    return "\n".join([
        "430 1 0:50 / / rw,relatime - overlay overlay rw,lowerdir=/x",
        f"124 430 254:0 {root_dir}/{CID}/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw",
        f"179 430 254:0 {root_dir}/{CID}/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw",
    ])


@pytest.mark.parametrize("root_dir", [
    "/var/lib/docker/containers",  # Docker, data-root on the root filesystem
    "/containers",  # Docker, data-root on a filesystem of its own
    "/var/lib/containers/storage/overlay-containers",  # Podman (…/<id>/userdata/hostname)
])
def test_own_container_id_comes_from_the_files_the_engine_mounts(root_dir):
    text = mountinfo(root_dir).replace(f"{CID}/hostname", f"{CID}/userdata/hostname") if "overlay" in root_dir \
        else mountinfo(root_dir)
    assert own_container_id(text) == CID


def test_no_container_id_on_a_host_or_from_a_mere_mention():
    host = "23 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n25 23 0:5 / /dev rw - devtmpfs udev rw"
    assert own_container_id(host) is None
    # A bind mount of some containers/<id>/ directory elsewhere does not make us that container.
    other = f"99 23 254:0 /var/lib/docker/containers/{CID}/logs /mnt/logs rw - ext4 /dev/vda rw"
    assert own_container_id(other) is None


def test_mounts_of_keeps_writable_binds_and_volumes():
    inspect = {"Mounts": [
        {"Type": "bind", "Source": "/var/run/docker.sock", "Destination": "/var/run/docker.sock", "RW": True},
        {"Type": "bind", "Source": "/home/u/p", "Destination": "/home/u/p", "RW": True},
        {"Type": "volume", "Name": "b", "Source": "/var/lib/docker/volumes/b/_data", "Destination": "/builds",
         "RW": True},
        {"Type": "bind", "Source": "/etc/ro", "Destination": "/ro", "RW": False},
        {"Type": "tmpfs", "Source": "", "Destination": "/tmp", "RW": True},
    ]}
    assert mounts_of(inspect) == (mm("/var/run/docker.sock", "/var/run/docker.sock"), mm("/home/u/p", "/home/u/p"),
                                  mm("/builds", "/var/lib/docker/volumes/b/_data"))
    assert mounts_of({}) == ()


# ---- which directory, and the errors ----------------------------------------------------------


def test_shared_root_prefers_the_given_dir_then_tmp_on_the_host_then_the_runs_dir(tmp_path):
    runs, tmp = Path("eval/runs"), Path("/tmp")
    assert shared_root(tmp_path, runs, in_container=True, tmp=tmp) == tmp_path
    assert shared_root(None, runs, in_container=False, tmp=tmp) == tmp
    assert shared_root(None, runs, in_container=True, tmp=tmp) == Path.cwd() / "eval/runs"


@pytest.mark.parametrize("value, remote", [
    (None, None), ("", None),
    ("unix:///var/run/docker.sock", None), ("unix:///run/user/1000/docker.sock", None),
    ("tcp://127.0.0.1:2375", None), ("tcp://localhost:2376", None), ("tcp://[::1]:2375", None),
    ("tcp://build-host.invalid:2376", "build-host.invalid"), ("ssh://ci@build-host.invalid", "build-host.invalid"),
    ("tcp://docker:2375", "docker"),  # GitLab's dind service
    ("https://10.1.2.3:2376", "10.1.2.3"), ("build-host.invalid:2375", "build-host.invalid"),
])
def test_remote_daemon_is_decided_from_docker_host_alone(value, remote):
    assert remote_daemon(value) == remote


def test_errors_are_one_line_naming_the_fix():
    text = remote_daemon_error("ssh://ci@h.invalid", "h.invalid").render()
    assert "\n" not in text and "DOCKER_HOST=ssh://ci@h.invalid" in text and "/var/run/docker.sock" in text
    text = missing_mount_error(Path("/w/eval/runs"), why="this container has no writable mounts").render()
    assert "\n" not in text and "-v /w/eval/runs:/w/eval/runs" in text and "--shared-dir" in text


# ---- reaping across containers ----------------------------------------------------------------


def labels(owner: str, container: str | None = None) -> dict[str, str]:
    return L.object_labels(run_id="r", case_id="c", owner=L.parse_owner(owner), deadline_epoch=2e9,
                           container=container)


def reap(lab, *, own=None, running=(), host="ci", start_times=None):
    return L.orphan_reason(lab, now=1e9, hostname=host, start_time_of=(start_times or {}).get,
                           own_container=own, container_running=lambda cid: cid in running)


def test_objects_of_a_controller_container_live_and_die_with_that_container():
    lab = labels("ci:1:100", container=CID)
    assert L.CONTAINER in lab
    assert reap(lab, running={CID}) is None
    assert reap(lab) == f"controller container {CID[:12]} is gone"


def test_pids_are_compared_only_within_the_same_container():
    # A controller in a container (pid 1 there) whose hostname equals the host's (`--network host`):
    # the host's pid 1 is another process, and must not make its live sandboxes orphans.
    in_container = labels("ci:1:100", container=CID)
    assert reap(in_container, own=None, running={CID}, start_times={1: 5}) is None
    # Inside that same container, the pid rule holds as on a host.
    assert reap(in_container, own=CID, running={CID}, start_times={}) == "owner process 1 on ci is gone"
    assert reap(in_container, own=CID, running={CID}, start_times={1: 100}) is None
    # A host-run object seen from a container: its pids are not ours to read.
    on_host = labels("ci:42:100")
    assert L.CONTAINER not in on_host
    assert reap(on_host, own=CID, start_times={}) is None
    assert reap(on_host, own=None, start_times={}) == "owner process 42 on ci is gone"


# ---- long roots: a short alias for the sockets -------------------------------------------------


def test_a_short_root_is_used_as_is():
    root = Path(tempfile.mkdtemp(prefix="aes-t-", dir="/tmp"))
    try:
        host = HostPaths.at(root)
        assert host.alias is None and host.base == root
    finally:
        root.rmdir()


def test_a_long_root_is_reached_through_a_short_alias_and_the_daemon_gets_the_real_path(tmp_path):
    from agent_eval_sandbox.unix_socket import MAX_SOCKET_PATH_BYTES

    root = tmp_path / ("a-ci-checkout-" * 6) / "eval" / "runs"
    host = HostPaths.at(root, (mm(str(tmp_path), "/daemon/side"),), in_container=True, tmp=Path("/tmp"))
    assert host.alias is not None and host.alias.resolve() == root and host.base == host.alias
    stage = host.temp_dir("aes-").path
    assert stage.parent == host.alias and (root / stage.name).is_dir()
    socket_path = stage / "slot-0000" / "run" / "gateway.sock"
    assert len(str(socket_path).encode()) <= MAX_SOCKET_PATH_BYTES < len(str(root / socket_path.relative_to(
        host.alias)).encode())
    real = root / stage.name / "run"
    assert host.for_daemon(stage / "run") == Path("/daemon/side") / real.relative_to(tmp_path)


def test_a_pod_counts_as_a_container_though_it_has_no_engine_marker():
    from agent_eval_sandbox.sandbox.docker_host import in_a_container

    assert in_a_container(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert not in_a_container(None, {}) or Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()
