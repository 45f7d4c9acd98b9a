"""The objects the Kubernetes backend generates: strictly valid, hardened, and as the client's models read them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes_validate import ValidationError

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.sandbox import kubernetes_objects as ko
from agent_eval_sandbox.sandbox import labels as L
from tests.unit.sandbox.kube_fixtures import spec_with_mounts, validate_strict

SETTINGS = ko.KubeSettings(namespace="evals", runtime_class="gvisor", node_selector={"pool": "sandboxes"},
                           tolerations=({"key": "sandboxes", "operator": "Exists", "effect": "NoSchedule"},),
                           image_pull_secrets=("registry-credentials",))
OWNER = ko.OwnerRef(name="controller-abc", uid="0b9c3f0e-1111-2222-3333-444455556666")
ANNOTATIONS = {L.RUN_ID: "run", L.CASE_ID: "case_1/odd name", L.OWNER: "host:1:2", L.DEADLINE: "123"}


def _case_pod(tmp_path: Path, settings: ko.KubeSettings = SETTINGS) -> tuple[dict[str, Any], ko.MountPlan]:
    spec = spec_with_mounts(tmp_path)
    plan = ko.plan_mounts(spec, {m.source: m.source.is_dir() for m in spec.mounts})
    pod = ko.case_pod(spec, name=ko.dns_name(spec.run_id, spec.case_id, suffix="a1b2c3"), settings=settings,
                      plan=plan, control_bytes={v.name: 10 for v in plan.volumes}, annotations=ANNOTATIONS,
                      owners=(OWNER,), active_deadline_s=4000)
    return pod, plan


def _as_client_model(obj: dict[str, Any], model: str) -> Any:
    """The object read into the official client's model, and written back: nothing may be lost."""
    client = kubernetes.client.ApiClient()
    parsed = client.deserialize(json.dumps(obj), model, "application/json")
    assert client.sanitize_for_serialization(parsed) == obj
    return parsed


def test_the_case_pod_is_strictly_valid_and_reads_into_the_clients_model(tmp_path: Path):
    pod, _ = _case_pod(tmp_path)
    validate_strict(pod)
    model = _as_client_model(pod, "V1Pod")
    assert model.spec.containers[0].security_context.read_only_root_filesystem is True


def test_strict_validation_catches_an_unknown_field(tmp_path: Path):
    pod, _ = _case_pod(tmp_path)
    pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True
    with pytest.raises(ValidationError):
        validate_strict(pod)


def test_the_case_pod_is_hardened_as_the_issue_lists(tmp_path: Path):
    pod, plan = _case_pod(tmp_path)
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["hostNetwork"] is spec["hostPID"] is spec["hostIPC"] is False
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 4000
    assert spec["runtimeClassName"] == "gvisor" and spec["nodeSelector"] == {"pool": "sandboxes"}
    assert spec["tolerations"] == [{"key": "sandboxes", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                       "seccompProfile": {"type": "RuntimeDefault"}}
    (agent,) = spec["containers"]
    (control,) = spec["initContainers"]
    for container, uid in ((agent, 1000), (control, ko.CONTROL_UID)):
        assert container["securityContext"] == {
            "runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}
        # requests = limits: the Pod is Guaranteed, and nothing bursts past what the sandbox: block says.
        assert container["resources"]["requests"] == container["resources"]["limits"]
    assert agent["resources"]["limits"] == {"cpu": "1500m", "memory": "2048Mi"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["workspace"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1024Mi"}
    assert volumes["home"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}
    assert volumes["tmp"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Mi"}
    assert all("sizeLimit" in v["emptyDir"] for v in spec["volumes"])
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    assert {paths.WORKSPACE, paths.HOME, "/tmp"} <= set(mounts)
    # What Docker bind-mounts read-only is a read-only control volume for the agent, written by `control` only.
    for path in (paths.RUN_DIR, "/etc/claude-code", f"{paths.WORKSPACE}/skills"):
        assert mounts[path]["readOnly"] is True
    assert [m.target for m in plan.writable_files] == [f"{paths.WORKSPACE}/CLAUDE.md"]
    assert {m["mountPath"] for m in control["volumeMounts"]} == {
        f"{ko.CONTROL_ROOT}/{v.name}" for v in plan.volumes} | {f"{ko.CONTROL_ROOT}/{ko.HANDOFF_VOLUME}"}
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "controller-abc",
                                                   "uid": OWNER.uid, "blockOwnerDeletion": False}]


def test_labels_are_valid_label_values_and_the_exact_ids_are_annotations(tmp_path: Path):
    pod, _ = _case_pod(tmp_path)
    meta = pod["metadata"]
    assert meta["labels"] == {L.MANAGED: "1", L.RUN_ID: "20250101-120000-ab12", L.ROLE: "case"}
    assert meta["annotations"][L.CASE_ID] == "case_1/odd name"
    assert len(meta["name"]) <= 63 and meta["name"].startswith("aes-20250101-120000-ab12-case-1-odd-name")
    assert ko.label_value("run with spaces/and:colons") == ko.label_value("run with spaces/and:colons")
    assert ko.label_value("run with spaces/and:colons").startswith("h")
    assert ko.run_selector("r1") == f"{L.MANAGED}=1,{L.RUN_ID}=r1"


def test_without_runtime_class_or_scheduling_keys_the_pod_names_none(tmp_path: Path):
    pod, _ = _case_pod(tmp_path, ko.KubeSettings(namespace="evals"))
    validate_strict(pod)
    assert not {"runtimeClassName", "nodeSelector", "tolerations", "imagePullSecrets"} & set(pod["spec"])


def test_the_network_policy_denies_ingress_and_allows_egress_to_the_relay_only():
    peer = ko.ControllerPeer("10.96.0.20", 8470, {"batch.kubernetes.io/controller-uid": "abc",
                                                  "app.kubernetes.io/name": "agent-eval-sandbox-controller"})
    policy = ko.network_policy("r1", name="aes-r1-sandbox", settings=SETTINGS, peer=peer, annotations=ANNOTATIONS,
                               owners=(OWNER,))
    validate_strict(policy)
    _as_client_model(policy, "V1NetworkPolicy")
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {L.MANAGED: "1", L.RUN_ID: "r1"}}
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    (rule,) = spec["egress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8470}]
    assert rule["to"] == [{"ipBlock": {"cidr": "10.96.0.20/32"}}, {"podSelector": {"matchLabels": dict(peer.pod_labels)}}]


def test_the_probe_pod_is_valid_and_under_the_runs_policy():
    probe = ko.probe_pod("r1", name="aes-r1-probe", image="img:1", settings=SETTINGS,
                         targets=["10.0.0.1:8470", "10.0.0.1:40000"], annotations=ANNOTATIONS, owners=())
    validate_strict(probe)
    _as_client_model(probe, "V1Pod")
    assert probe["metadata"]["labels"][L.RUN_ID] == "r1" and probe["metadata"]["labels"][L.MANAGED] == "1"
    assert probe["spec"]["containers"][0]["command"][-2:] == ["10.0.0.1:8470", "10.0.0.1:40000"]


def test_file_mounts_share_their_parent_and_files_in_writable_areas_are_copied(tmp_path: Path):
    spec = spec_with_mounts(tmp_path)
    plan = ko.plan_mounts(spec, {m.source: m.source.is_dir() for m in spec.mounts})
    by_path = {v.mount_path: v for v in plan.volumes}
    assert set(by_path) == {paths.RUN_DIR, "/etc/claude-code", f"{paths.WORKSPACE}/skills"}
    assert by_path["/etc/claude-code"].entries == ((tmp_path / "managed.json", "managed-settings.json"),)
    assert by_path[paths.RUN_DIR].entries == ((tmp_path / "channel", None),)


def test_dns_names_are_bounded_and_valid():
    name = ko.dns_name("R" * 100, "Case/With Space" * 10, suffix="abcdef")
    assert len(name) <= 63 and name == name.lower() and name.endswith("-abcdef")
    assert ko.dns_name("", suffix="sandbox") == "aes-x-sandbox"
    assert int(time.time()) > 0
