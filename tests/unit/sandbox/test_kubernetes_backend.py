"""The Kubernetes backend's calls, against a fake of the official client's API boundary."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile

import kubernetes
import pytest

from agent_eval_sandbox.config.models import SandboxConfig
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.sandbox import kubernetes_objects as ko
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.base import EndReason, SandboxError
from agent_eval_sandbox.sandbox.kubernetes_api import ClientPodApi, KubernetesUnavailableError
from agent_eval_sandbox.sandbox.kubernetes_backend import KubernetesBackend, NetworkNotEnforcedError
from agent_eval_sandbox.sandbox.relay import Relay
from tests.unit.sandbox.fake_kube_client import ExecCall, FakeCluster, api_error
from tests.unit.sandbox.kube_fixtures import spec_with_mounts, validate_strict

OWNER = L.Owner("controller-host", 4242, 99)


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def relay():
    with Relay("127.0.0.1", 0) as r:
        yield r


def _backend(cluster: FakeCluster, relay: Relay, **kwargs) -> KubernetesBackend:
    config = SandboxConfig.model_validate({"backend": "kubernetes", "image": "registry.example/aes:1",
                                           "namespace": "evals", "runtime_class": "gvisor",
                                           "controller": {"host": "127.0.0.1", "port": 8470}})
    api = ClientPodApi("evals", core=cluster, networking=cluster, stream=cluster.stream)
    return KubernetesBackend(config, api=api, relay=relay, owner=OWNER, start_timeout_s=5, **kwargs)


def test_create_makes_the_pod_fills_its_control_volumes_and_hands_the_case_its_token(cluster, relay, tmp_path):
    backend = _backend(cluster, relay)
    spec = spec_with_mounts(tmp_path)
    box = backend.create(spec)
    (policy_call,) = [body for name, (_, body) in cluster.calls if name == "create_namespaced_network_policy"]
    validate_strict(policy_call)
    assert policy_call["spec"]["podSelector"]["matchLabels"] == {L.MANAGED: "1", L.RUN_ID: spec.run_id}
    assert policy_call["spec"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": relay.port}]
    (pod_call,) = [(ns, body) for name, (ns, body) in cluster.calls if name == "create_namespaced_pod"]
    namespace, pod = pod_call
    assert namespace == "evals" and pod["metadata"]["namespace"] == "evals"
    validate_strict(pod)
    assert pod["spec"]["runtimeClassName"] == "gvisor"
    assert pod["metadata"]["annotations"][L.OWNER] == OWNER.label()
    assert pod["metadata"]["annotations"][L.CASE_ID] == spec.case_id
    assert "ownerReferences" not in pod["metadata"]  # outside the cluster there is no Pod to own it
    # The control volumes go in by tar over exec, into the init container (as nobody), then the handoff.
    control = [c for c in cluster.execs if c.container == ko.CONTROL]
    assert all(c.command[:2] == ["sh", "-c"] for c in control[:-1]) and control[-1].command[-1] == ko.READY_FILE
    filled: dict[str, dict[str, bytes]] = {}
    for call in control[:-1]:
        filled.setdefault(call.command[-1], {}).update(call.tar_members())
    plan = ko.plan_mounts(spec, {m.source: m.source.is_dir() for m in spec.mounts})
    run_volume = plan.volume_at(paths.RUN_DIR)
    assert run_volume is not None
    run_files = filled[run_volume.fill_path]
    assert run_files[paths.PROMPT_FILE_NAME] == b"prompt"
    link = json.loads(run_files["relay.json"])
    assert link["host"] == "127.0.0.1" and link["port"] == relay.port
    assert relay.lookup(link["token"]) is not None and len(link["token"]) >= 43
    assert filled[plan.volume_at("/etc/claude-code").fill_path] == {"managed-settings.json": b"{}"}
    # A file mount inside the workspace is copied into it, in the agent container.
    agent = [c for c in cluster.execs if c.container == ko.AGENT]
    assert agent[0].command[-1] == paths.WORKSPACE and agent[0].tar_members() == {"CLAUDE.md": b"notes"}
    box.destroy()
    (delete,) = [args for name, args in cluster.calls if name == "delete_namespaced_pod"]
    assert delete[0] == box.name and isinstance(delete[2], kubernetes.client.V1DeleteOptions)
    assert delete[2].grace_period_seconds == 0 and delete[2].propagation_policy == "Background"
    assert relay.lookup(link["token"]) is None  # worthless once its case is over
    box.destroy()  # idempotent


def test_exec_wraps_env_and_cwd_streams_output_and_maps_the_exit_code(cluster, relay, tmp_path):
    def handler(call: ExecCall):
        if call.command[:1] == ["grep"]:
            return b"/sys/fs/cgroup/memory.events:oom_kill 0\n/sys/fs/cgroup/pids.events:max 0\n", b"", 0
        if "claude" in call.command:
            return b'{"type":"result"}\n', b"warn\n", 3
        return b"", b"", 0

    cluster.handler = handler
    box = _backend(cluster, relay).create(spec_with_mounts(tmp_path))
    out = io.BytesIO()
    result = box.exec(["claude", "-p"], env={"A": "1"}, cwd="/workspace", stdout=out, timeout=30)
    assert result.exit_code == 3 and result.end_reason is EndReason.EXITED and result.oom_kills == 0
    assert out.getvalue() == b'{"type":"result"}\n' and result.stderr == b"warn\n"
    call = [c for c in cluster.execs if "claude" in c.command][0]
    assert call.command == ["env", "-C", "/workspace", "A=1", "claude", "-p"] and call.container == "agent"
    with pytest.raises(SandboxError, match="Pod's user"):
        box.exec(["id"], user="0:0")


def test_copy_out_extracts_through_the_safe_extraction(cluster, relay, tmp_path):
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in (("./ok.txt", b"fine"),):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        evil = tarfile.TarInfo("../escape.txt")
        evil.size = 1
        tar.addfile(evil, io.BytesIO(b"x"))

    def handler(call: ExecCall):
        if call.command[:2] == ["sh", "-c"] and call.command[-1] == "/workspace" and "tar -c" in call.command[2]:
            return b"D\n" + archive.getvalue(), b"", 0
        if call.command[-1] == "/missing":
            return b"N\n", b"", 0
        return b"", b"", 0

    cluster.handler = handler
    box = _backend(cluster, relay).create(spec_with_mounts(tmp_path))
    assert box.copy_out("/missing", tmp_path / "m", max_bytes=100, max_files=10).found is False
    with pytest.raises(UserError, match=r"'\.\.'"):
        box.copy_out("/workspace", tmp_path / "out", max_bytes=1000, max_files=10)
    assert (tmp_path / "out" / "ok.txt").read_bytes() == b"fine"
    assert not (tmp_path / "escape.txt").exists()


def test_a_broken_exec_stream_is_a_sandbox_error(cluster, relay, tmp_path):
    box = _backend(cluster, relay).create(spec_with_mounts(tmp_path))
    cluster.handler = lambda call: (b"", b"", None)
    with pytest.raises(SandboxError, match="without an exit code"):
        box.exec(["true"], timeout=10)


def test_destroy_run_removes_every_pod_and_policy_of_the_run_by_label(cluster, relay, tmp_path):
    backend = _backend(cluster, relay)
    box = backend.create(spec_with_mounts(tmp_path))
    run_id = box.spec.run_id
    foreign = dict(cluster.pods[box.name])
    foreign["metadata"] = {**foreign["metadata"], "name": "aes-other",
                           "annotations": {**foreign["metadata"]["annotations"], L.OWNER: "controller-host:1:1"}}
    cluster.pods["aes-other"] = foreign
    removed = backend.destroy_run(run_id)
    assert {(r.kind, r.name) for r in removed} == {("pod", box.name), ("pod", "aes-other"),
                                                   ("networkpolicy", ko.dns_name(run_id, suffix="sandbox"))}
    selectors = {args[1] for name, args in cluster.calls if name.startswith("list_namespaced")}
    assert selectors == {f"{L.MANAGED}=1,{L.RUN_ID}={run_id}"}
    assert cluster.pods == {} and cluster.policies == {}


def test_the_reaper_removes_orphans_only(cluster, relay, tmp_path, monkeypatch):
    backend = _backend(cluster, relay)
    box = backend.create(spec_with_mounts(tmp_path))
    orphan = json.loads(json.dumps(cluster.pods[box.name]))
    orphan["metadata"]["name"] = "aes-orphan"
    orphan["metadata"]["annotations"][L.OWNER] = "controller-host:4243:7"
    cluster.pods["aes-orphan"] = orphan
    monkeypatch.setattr("socket.gethostname", lambda: "controller-host")
    monkeypatch.setattr(L, "proc_start_time", lambda pid: 99 if pid == 4242 else None)
    removed = backend.reap_orphans()
    assert [(r.name, r.reason) for r in removed] == [("aes-orphan", "owner process 4243 on controller-host is gone")]
    assert box.name in cluster.pods
    assert {args[1] for name, args in cluster.calls if name.startswith("list_namespaced")} == {f"{L.MANAGED}=1"}


@pytest.mark.parametrize(("status", "message", "error", "match"), [
    (403, 'pods is forbidden: User "system:serviceaccount:evals:x" cannot create resource "pods"', UserError,
     "deploy/kubernetes/role.yaml"),
    (403, 'pod rejected: RuntimeClass "gvisor" not found', UserError, "create the RuntimeClass"),
    (404, 'namespaces "evals" not found', UserError, "create the namespace"),
    (401, "Unauthorized", UserError, "credentials"),
    (500, "etcdserver: request timed out", SandboxError, "answered 500"),
])
def test_api_errors_become_one_clear_error(cluster, relay, tmp_path, status, message, error, match):
    cluster.fail_create = api_error(status, message)
    with pytest.raises(error, match=match) as caught:
        _backend(cluster, relay).create(spec_with_mounts(tmp_path))
    if error is UserError:
        assert "\n" not in caught.value.render()
    assert relay.registered == 0  # the failed case's token is revoked


def test_the_probe_passes_only_when_the_policy_confines_the_pod(cluster, relay, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")

    def logs_reaching(*reachable: str):
        def create(namespace, body):
            cluster.pods[body["metadata"]["name"]] = body
            targets = body["spec"]["containers"][0]["command"][4:]
            cluster.logs[body["metadata"]["name"]] = json.dumps({t: t in reachable or t.endswith(f":{relay.port}")
                                                                 for t in targets})
        return create

    cluster.create_namespaced_pod = logs_reaching()  # type: ignore[method-assign]
    _backend(cluster, relay).prepare_run("r1")
    assert cluster.pods == {}  # the probe Pod is deleted
    cluster.create_namespaced_pod = logs_reaching("10.96.0.1:443")  # type: ignore[method-assign]
    with pytest.raises(NetworkNotEnforcedError, match="10.96.0.1:443") as caught:
        _backend(cluster, relay).prepare_run("r2")
    assert "--allow-unenforced-network" in caught.value.render()


def test_allow_unenforced_network_skips_the_probe_with_a_warning(cluster, relay):
    warnings: list[str] = []
    _backend(cluster, relay, allow_unenforced_network=True, warn=warnings.append).prepare_run("r1")
    assert [name for name, _ in cluster.calls] == ["create_namespaced_network_policy"]
    assert "--allow-unenforced-network" in warnings[0]


def test_a_missing_client_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(KubernetesUnavailableError, match=r"pip install 'agent-eval-sandbox\[kubernetes\]'"):
        ClientPodApi("evals")


def test_choosing_docker_never_imports_the_kubernetes_client():
    code = ("import sys\nfrom agent_eval_sandbox.sandbox.registry import get_backend\n"
            "get_backend('docker')\nprint(any(m == 'kubernetes' or m.startswith('kubernetes.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_check_runtime_points_to_runtime_class(cluster, relay):
    with pytest.raises(UserError, match="runtime_class"):
        _backend(cluster, relay).check_runtime("runsc")
