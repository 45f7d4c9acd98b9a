"""The Kubernetes objects of a run, from a `SandboxSpec` (pure: dicts in, dicts out; no client).

One case is one Pod of two containers:

- `control`, an init container running as `nobody`, holds the case's
  control volumes writable while the controller copies into them (by tar
  over exec) what Docker would bind-mount: the channel directory (the prompt,
  and the relay file that tells the in-Pod clients where the controller is
  and which token is theirs), the managed settings, the project's read-only
  resources. It exits once they are in (`.ready` in its handoff volume);
- `agent`, the sandbox proper, where every exec runs as the sandbox user.
  It sees the control volumes read-only, so the agent can neither rewrite
  its managed settings nor point its hook client elsewhere. Its main process
  only reaps orphans (there is no docker-init here).

The workspace, $HOME and /tmp are memory-backed, size-limited emptyDirs (like
Docker's tmpfs volumes they count against the memory limit once filled).
The run's NetworkPolicy selects every Pod of the run: no ingress, egress to
the controller's relay port only.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.kubernetes_settings import is_label_value
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.base import BindMount, SandboxSpec

AGENT = "agent"
CONTROL = "control"
CONTROL_ROOT = "/control"
HANDOFF_VOLUME = "handoff"
READY_FILE = f"{CONTROL_ROOT}/{HANDOFF_VOLUME}/.ready"
# The control container's user: not the sandbox user, so what it writes the agent can only read.
CONTROL_UID = 65534
CONTROL_CPU = "100m"
CONTROL_MEMORY = "64Mi"
CONTROL_VOLUME_SLACK = 1024 * 1024
ROLE_CASE = "case"
ROLE_PROBE = "probe"
ROLE_POLICY = "policy"
# The agent container's pid 1: reaps the orphans of the agent's processes and nothing else.
REAPER_MAIN = (
    "import os,signal,time\n"
    "signal.signal(signal.SIGTERM,lambda *a: os._exit(0))\n"
    "while True:\n"
    "  try: os.waitpid(-1,0)\n"
    "  except ChildProcessError: time.sleep(1)\n"
)
WAIT_FOR_HANDOFF = (
    "import os,sys,time\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
)


@dataclass(frozen=True)
class KubeSettings:
    """What the `sandbox:` block says about the cluster, resolved (the namespace is known)."""

    namespace: str
    runtime_class: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    image_pull_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class OwnerRef:
    """The controller's own Pod, when it runs in the cluster: the garbage collector removes what it owns."""

    name: str
    uid: str
    kind: str = "Pod"
    api_version: str = "v1"

    def manifest(self) -> dict[str, Any]:
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid,
                "blockOwnerDeletion": False}


@dataclass(frozen=True)
class ControllerPeer:
    """Where the run's Pods may connect: the relay's address, and the controller Pod's labels in-cluster."""

    address: str
    port: int
    pod_labels: Mapping[str, str] | None = None


# ---- names and labels ---------------------------------------------------------------------

_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def dns_name(*parts: str, suffix: str, limit: int = 63) -> str:
    """A DNS-label name `aes-<parts>-<suffix>`, readable, lowercase, at most `limit` characters."""
    cleaned = [_NOT_DNS.sub("-", p.lower()).strip("-") or "x" for p in parts]
    room = limit - len("aes-") - len(suffix) - 1
    body = "-".join(cleaned)[:room].strip("-") or "x"
    return f"aes-{body}-{suffix}"


def label_value(value: str) -> str:
    """`value` when it is a valid label value, else a digest of it (a run id may hold any character)."""
    if value and is_label_value(value):
        return value
    return "h" + hashlib.sha256(value.encode()).hexdigest()[:40]


def run_selector(run_id: str) -> str:
    return f"{L.MANAGED}=1,{L.RUN_ID}={label_value(run_id)}"


MANAGED_SELECTOR = f"{L.MANAGED}=1"


def run_labels(run_id: str, role: str) -> dict[str, str]:
    return {L.MANAGED: "1", L.RUN_ID: label_value(run_id), L.ROLE: role}


def metadata(name: str, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str],
             owners: Sequence[OwnerRef]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels),
                            "annotations": dict(annotations)}
    if owners:
        meta["ownerReferences"] = [o.manifest() for o in owners]
    return meta


# ---- the control volumes: what Docker bind-mounts, copied in instead ---------------------------


@dataclass(frozen=True)
class ControlVolume:
    """An emptyDir the control container fills and the agent container mounts read-only at `mount_path`."""

    name: str
    mount_path: str
    # (host source, name inside the volume or None for a directory's contents)
    entries: tuple[tuple[Path, str | None], ...]

    @property
    def fill_path(self) -> str:
        """Where the control container sees it."""
        return f"{CONTROL_ROOT}/{self.name}"


@dataclass(frozen=True)
class MountPlan:
    volumes: tuple[ControlVolume, ...]
    # File mounts inside the writable workspace or $HOME: an emptyDir cannot sit on a file, so
    # they are copied there (writable by the agent, unlike on Docker).
    writable_files: tuple[BindMount, ...]

    def volume_at(self, mount_path: str) -> ControlVolume | None:
        return next((v for v in self.volumes if v.mount_path == mount_path), None)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def plan_mounts(spec: SandboxSpec, is_dir: Mapping[Path, bool]) -> MountPlan:
    """Which control volume each of the spec's mounts becomes (`is_dir`: what each source is)."""
    by_path: dict[str, list[tuple[Path, str | None]]] = {}
    writable: list[BindMount] = []
    for mount in spec.mounts:
        target = posixpath.normpath(mount.target)
        if is_dir[mount.source]:
            by_path.setdefault(target, []).append((mount.source, None))
            continue
        parent, name = posixpath.split(target)
        if any(_inside(parent, area) for area in (spec.workspace, spec.home, "/tmp")):
            writable.append(mount)
        else:
            by_path.setdefault(parent, []).append((mount.source, name))
    volumes = tuple(ControlVolume(f"control-{i}", path, tuple(entries))
                    for i, (path, entries) in enumerate(sorted(by_path.items())))
    return MountPlan(volumes, tuple(writable))


# ---- the case Pod ---------------------------------------------------------------------------


def _quantity(num_bytes: int) -> str:
    """Bytes as a Kubernetes quantity, exact (Mi when it divides, else plain bytes)."""
    mib = 1024 * 1024
    return f"{num_bytes // mib}Mi" if num_bytes % mib == 0 else str(num_bytes)


def _cpu(cpus: float) -> str:
    return f"{max(1, round(cpus * 1000))}m"


def _container_security(uid: int, gid: int, *, read_only_root: bool, no_new_privileges: bool,
                        cap_drop: Sequence[str], cap_add: Sequence[str]) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"drop": list(cap_drop)}
    if cap_add:
        capabilities["add"] = list(cap_add)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "readOnlyRootFilesystem": read_only_root,
        "allowPrivilegeEscalation": not no_new_privileges,
        "privileged": False,
        "capabilities": capabilities,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _pod_spec_common(settings: KubeSettings, active_deadline_s: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "terminationGracePeriodSeconds": 0,
        "activeDeadlineSeconds": max(1, active_deadline_s),
    }
    if settings.runtime_class:
        spec["runtimeClassName"] = settings.runtime_class
    if settings.node_selector:
        spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        spec["tolerations"] = [dict(t) for t in settings.tolerations]
    if settings.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    return spec


def case_pod(spec: SandboxSpec, *, name: str, settings: KubeSettings, plan: MountPlan,
             control_bytes: Mapping[str, int], annotations: Mapping[str, str], owners: Sequence[OwnerRef],
             active_deadline_s: int) -> dict[str, Any]:
    """The Pod of one case. `control_bytes`: how much each control volume will hold."""
    h, lim = spec.hardening, spec.limits
    security = _container_security(h.uid, h.gid, read_only_root=h.read_only_root,
                                   no_new_privileges=h.no_new_privileges, cap_drop=h.cap_drop, cap_add=h.cap_add)
    control_security = _container_security(CONTROL_UID, CONTROL_UID, read_only_root=True, no_new_privileges=True,
                                           cap_drop=("ALL",), cap_add=())
    resources = {"cpu": _cpu(lim.cpus), "memory": _quantity(lim.memory_bytes)}
    control_resources = {"cpu": CONTROL_CPU, "memory": CONTROL_MEMORY}
    volumes: list[dict[str, Any]] = [
        {"name": "workspace", "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(lim.workspace_bytes)}},
        {"name": "home", "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(lim.home_bytes)}},
        {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(lim.tmp_bytes)}},
        {"name": HANDOFF_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}},
    ]
    agent_mounts: list[dict[str, Any]] = [
        {"name": "workspace", "mountPath": spec.workspace},
        {"name": "home", "mountPath": spec.home},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    control_mounts: list[dict[str, Any]] = [{"name": HANDOFF_VOLUME, "mountPath": f"{CONTROL_ROOT}/{HANDOFF_VOLUME}"}]
    for volume in plan.volumes:
        size = control_bytes.get(volume.name, 0) + CONTROL_VOLUME_SLACK
        volumes.append({"name": volume.name, "emptyDir": {"sizeLimit": _quantity(-(-size // (1024 * 1024))
                                                                                * 1024 * 1024)}})
        agent_mounts.append({"name": volume.name, "mountPath": volume.mount_path, "readOnly": True})
        control_mounts.append({"name": volume.name, "mountPath": volume.fill_path})
    pod_spec = _pod_spec_common(settings, active_deadline_s)
    pod_spec.update({
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": h.uid,
            "runAsGroup": h.gid,
            "fsGroup": h.gid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [{
            "name": CONTROL,
            "image": spec.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-I", "-c", WAIT_FOR_HANDOFF, READY_FILE],
            "securityContext": control_security,
            "resources": {"requests": control_resources, "limits": control_resources},
            "volumeMounts": control_mounts,
        }],
        "containers": [{
            "name": AGENT,
            "image": spec.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-I", "-c", REAPER_MAIN],
            "workingDir": spec.workspace,
            "env": [{"name": k, "value": v} for k, v in {**spec.env, "HOME": spec.home}.items()],
            "securityContext": security,
            "resources": {"requests": resources, "limits": resources},
            "volumeMounts": agent_mounts,
        }],
        "volumes": volumes,
    })
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(name, settings.namespace, run_labels(spec.run_id, ROLE_CASE), annotations, owners),
        "spec": pod_spec,
    }


# ---- the run's NetworkPolicy and the enforcement probe ----------------------------------------


def network_policy(run_id: str, *, name: str, settings: KubeSettings, peer: ControllerPeer,
                   annotations: Mapping[str, str], owners: Sequence[OwnerRef]) -> dict[str, Any]:
    """Every Pod of the run: no ingress at all, egress to the controller's relay port only (no DNS:
    the Pods are given an address)."""
    to: list[dict[str, Any]] = [{"ipBlock": {"cidr": f"{peer.address}/32"}}]
    if peer.pod_labels:
        to.append({"podSelector": {"matchLabels": dict(peer.pod_labels)}})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(name, settings.namespace, run_labels(run_id, ROLE_POLICY), annotations, owners),
        "spec": {
            "podSelector": {"matchLabels": {L.MANAGED: "1", L.RUN_ID: label_value(run_id)}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [{"to": to, "ports": [{"protocol": "TCP", "port": peer.port}]}],
        },
    }


# Tries each "host:port" of argv within a few seconds and prints {"host:port": true|false, ...}.
PROBE_SCRIPT = (
    "import json,socket,sys\n"
    "out={}\n"
    "for target in sys.argv[1:]:\n"
    "  host,_,port=target.rpartition(':')\n"
    "  try:\n"
    "    socket.create_connection((host,int(port)),timeout=5).close(); out[target]=True\n"
    "  except OSError: out[target]=False\n"
    "print(json.dumps(out),flush=True)\n"
)


def probe_pod(run_id: str, *, name: str, image: str, settings: KubeSettings, targets: Sequence[str],
              annotations: Mapping[str, str], owners: Sequence[OwnerRef], uid: int = 1000) -> dict[str, Any]:
    """A Pod under the run's NetworkPolicy that tries to connect to each of `targets` and reports."""
    security = _container_security(uid, uid, read_only_root=True, no_new_privileges=True, cap_drop=("ALL",),
                                   cap_add=())
    resources = {"cpu": CONTROL_CPU, "memory": CONTROL_MEMORY}
    pod_spec = _pod_spec_common(settings, 120)
    pod_spec.update({
        "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "probe",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-I", "-c", PROBE_SCRIPT, *targets],
            "securityContext": security,
            "resources": {"requests": resources, "limits": resources},
        }],
    })
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(name, settings.namespace, run_labels(run_id, ROLE_PROBE), annotations, owners),
        "spec": pod_spec,
    }
