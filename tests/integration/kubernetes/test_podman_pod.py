"""The generated case Pod, run for real by podman: hardening, limits, files in and out, deadlines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.lifecycle.container import CONFINED
from agent_eval_sandbox.sandbox.base import BindMount, EndReason, Limits, SandboxSpec
from agent_eval_sandbox.sandbox.kubernetes_backend import KubernetesBackend
from agent_eval_sandbox.sandbox.labels import MANAGED
from agent_eval_sandbox.sandbox.policy import STALE_AFTER_S
from tests.integration.cgroup_writes import CGROUP_WRITES
from tests.integration.kubernetes.podman_api import PodmanPodApi

pytestmark = pytest.mark.docker


def _spec(image: str, tmp_path: Path, run_id: str = "podman-run") -> SandboxSpec:
    channel = tmp_path / "channel"
    channel.mkdir()
    (channel / paths.PROMPT_FILE_NAME).write_text("the prompt")
    managed = tmp_path / "managed-settings.json"
    managed.write_text('{"hooks": {}}')
    skills = tmp_path / "skills"
    (skills / "greeter").mkdir(parents=True)
    (skills / "greeter" / "SKILL.md").write_text("# greeter")
    return SandboxSpec(image=image, run_id=run_id, case_id="case-1", deadline_epoch=time.time() + STALE_AFTER_S,
                       limits=Limits(cpus=0.5, memory_bytes=256 * 1024 * 1024),
                       mounts=(BindMount(channel, paths.RUN_DIR), BindMount(managed, paths.MANAGED_SETTINGS),
                               BindMount(skills, f"{paths.WORKSPACE}/skills")))


def _sh(box, script: str, **kwargs):
    return box.exec(["sh", "-c", script], timeout=60, **kwargs)


def test_the_case_pod_runs_hardened_with_its_control_files_read_only(kube_backend: KubernetesBackend,
                                                                     podman_api: PodmanPodApi,
                                                                     podman_image: str, tmp_path: Path):
    spec = _spec(podman_image, tmp_path)
    with kube_backend.create(spec) as box:
        manifest = podman_api.manifests[box.name]
        assert manifest["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
        ids = _sh(box, "id -u; id -g")
        assert ids.ok and ids.stdout == b"1000\n1000\n"
        status = _sh(box, "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
        fields = dict(line.split(":\t") for line in status.stdout.decode().splitlines())
        assert fields == {"CapEff": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1",
                          "Seccomp": "2"}
        # Limits applied: requests = limits from the spec (cgroup v2 or v1).
        memory = _sh(box, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
        assert int(memory.stdout) == 256 * 1024 * 1024
        cpu = _sh(box, "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) "
                       "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
        quota, period = cpu.stdout.split()
        assert int(quota) / int(period) == pytest.approx(0.5)
        # Read-only root; the control files are there, read-only, not the agent's.
        assert not _sh(box, "touch /etc/x").ok
        assert _sh(box, f"cat {paths.PROMPT_FILE}").stdout == b"the prompt"
        assert _sh(box, f"cat {paths.MANAGED_SETTINGS}").stdout == b'{"hooks": {}}'
        assert _sh(box, "cat /workspace/skills/greeter/SKILL.md").stdout == b"# greeter"
        relay = json.loads(_sh(box, f"cat {paths.RUN_DIR}/relay.json").stdout)
        assert relay["host"] == "127.0.0.1" and len(relay["token"]) >= 43
        # (a marker no token or file here can hold by chance: a random token may well contain an "x")
        for target in (f"{paths.RUN_DIR}/relay.json", paths.MANAGED_SETTINGS, "/workspace/skills/greeter/SKILL.md"):
            tamper = _sh(box, f"echo TAMPERED > {target} || rm -f {target} || chmod 666 {target}; cat {target}")
            assert tamper.stdout and b"TAMPERED" not in tamper.stdout, target
        assert not _sh(box, f"touch {paths.RUN_DIR}/new").ok
        # The writable areas are the agent's.
        assert _sh(box, "touch /workspace/w /home/agent/h /tmp/t").ok


def test_the_pod_cannot_lift_its_limits(kube_backend: KubernetesBackend, podman_image: str, tmp_path: Path):
    # Kubernetes has no per-Pod read-only paths (the Docker backend sets them: crun on cgroup v1 mounts
    # the hierarchies' tmpfs writable by everyone, and loses their read-only flag when it re-binds them).
    # The hierarchies must be read-only mounts, not merely root's files: podman runs these Pods under
    # crun once it is installed (scripts/install-crun.sh).
    with kube_backend.create(_spec(podman_image, tmp_path)) as box:
        seen = json.loads(box.exec(["python3", "-c", CGROUP_WRITES], timeout=60).stdout)
        hierarchies = [point for point in seen["points"] if point != "/sys/fs/cgroup"]
        assert hierarchies and not set(seen["writable"]) & set(hierarchies), seen
        limits = {name: result for name, result in seen["written"].items() if name != "planted"}
        assert limits and set(limits.values()) == {"Read-only file system"}, seen
        memory = _sh(box, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
        assert int(memory.stdout) == 256 * 1024 * 1024


_VSOCK_AND_IO_URING = (
    "import ctypes, errno, socket\n"
    "try:\n    socket.socket(40, socket.SOCK_STREAM).close(); print('vsock ok')\n"
    "except OSError as exc:\n    print('vsock', errno.errorcode[exc.errno])\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "fd = libc.syscall(425, 4, ctypes.create_string_buffer(120))\n"
    "print('io_uring', 'ok' if fd >= 0 else errno.errorcode[ctypes.get_errno()])\n")


def test_what_runs_confined_in_the_pod_gets_no_vsock_and_no_io_uring(kube_backend: KubernetesBackend,
                                                                       podman_image: str, tmp_path: Path):
    # The launcher and the container hooks run under the tool's filter in a Pod too (the Pod sets
    # no-new-privileges); podman's default profile refuses io_uring (ENOSYS) but makes vsock sockets.
    with kube_backend.create(_spec(podman_image, tmp_path)) as box:
        plain = box.exec(["python3", "-c", _VSOCK_AND_IO_URING], timeout=60)
        confined = box.exec([*CONFINED, "python3", "-c", _VSOCK_AND_IO_URING], timeout=60)
    assert plain.stdout.split(b"\n")[0] == b"vsock ok", plain
    assert confined.stdout == b"vsock EAFNOSUPPORT\nio_uring EPERM\n", confined


def test_files_go_in_and_come_out_by_tar_over_exec(kube_backend: KubernetesBackend, podman_image: str,
                                                   tmp_path: Path):
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("alpha")
    (source / "sub" / "b.bin").write_bytes(bytes(range(256)) * 1000)
    (source / "link").symlink_to("a.txt")
    with kube_backend.create(_spec(podman_image, tmp_path)) as box:
        report = box.copy_in(source, paths.WORKSPACE)
        assert (report.files, report.bytes) == (2, 5 + 256_000)
        box.copy_in_files({"c/d.txt": b"delta"}, paths.WORKSPACE)
        listing = _sh(box, "cd /workspace && find . -path ./skills -prune -o -print | sort && stat -c %u:%U a.txt")
        assert listing.stdout.decode().split() == [".", "./a.txt", "./c", "./c/d.txt", "./link", "./sub",
                                                   "./sub/b.bin", "1000:agent"]
        assert _sh(box, "echo changed > /workspace/a.txt && ln -s /etc/passwd /workspace/evil").ok
        out = tmp_path / "out"
        copied = box.copy_out(paths.WORKSPACE, out, max_bytes=10 * 1024 * 1024, max_files=1000)
        assert copied.found
        assert (out / "a.txt").read_text() == "changed\n"
        assert (out / "sub" / "b.bin").read_bytes() == bytes(range(256)) * 1000
        assert (out / "c" / "d.txt").read_text() == "delta"
        assert (out / "link").is_symlink() is False and not (out / "evil").exists()
        assert {s.path for s in copied.skipped} >= {"evil", "link"}
        single = box.copy_out("/workspace/c/d.txt", tmp_path / "one", max_bytes=1024, max_files=10)
        assert single.found and (tmp_path / "one" / "d.txt").read_text() == "delta"
        assert box.copy_out("/workspace/nothing", tmp_path / "none", max_bytes=1024, max_files=10).found is False


def test_a_deadline_stops_every_process_and_the_files_still_come_out(kube_backend: KubernetesBackend,
                                                                    podman_api: PodmanPodApi, podman_image: str,
                                                                    tmp_path: Path):
    box = kube_backend.create(_spec(podman_image, tmp_path))
    name = box.name
    try:
        started = time.monotonic()
        result = box.exec(["sh", "-c", "echo started > /workspace/mark; (while :; do date +%s%N >> /workspace/tick;"
                                       " sleep 0.05; done) & sleep 300"], timeout=3)
        assert result.end_reason is EndReason.TIMED_OUT and result.exit_code is None
        assert time.monotonic() - started < 30
        assert box.frozen
        out1, out2 = tmp_path / "o1", tmp_path / "o2"
        box.copy_out(paths.WORKSPACE, out1, max_bytes=1 << 20, max_files=100)
        time.sleep(1)
        box.copy_out(paths.WORKSPACE, out2, max_bytes=1 << 20, max_files=100)
        # Stopped: the background writer wrote nothing more between the two copies.
        assert (out1 / "mark").read_text() == "started\n"
        assert (out1 / "tick").read_text() == (out2 / "tick").read_text()
        with pytest.raises(Exception, match="frozen"):
            box.exec(["true"])
        assert box.thaw()
        assert box.exec(["sh", "-c", "ps -e -o comm= | grep -c sleep || true"], timeout=30).stdout == b"0\n"
        killed = box.exec(["sleep", "60"], timeout=2, on_timeout="kill_exec")
        assert killed.end_reason is EndReason.TIMED_OUT and not box.frozen
        assert box.exec(["true"], timeout=30).ok
    finally:
        box.destroy()
    assert podman_api.running_pods(f"{MANAGED}=1") == []
    assert name not in podman_api.manifests
