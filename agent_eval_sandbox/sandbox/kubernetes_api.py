"""The cluster as the Kubernetes backend sees it: a few calls (`PodApi`), and their client implementation.

`ClientPodApi` is the only code that imports the official `kubernetes` client
(an optional extra): create/read/delete Pods and NetworkPolicies, list them by
label selector, read a Pod's log, and exec with binary stdin/stdout/stderr
over the API server's websocket. Its errors are mapped here, once: what the
user can fix (credentials, RBAC, a missing namespace or RuntimeClass, an
admission refusal) is a `UserError`; the rest is a `SandboxError`.
"""

from __future__ import annotations

import contextlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.sandbox.base import SandboxError

STDOUT, STDERR = 1, 2
EXTRA = "agent-eval-sandbox[kubernetes]"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# A websocket frame of stdin at most this big (the API server's own limit is far above it).
STDIN_CHUNK = 256 * 1024


class KubernetesUnavailableError(UserError):
    """The client is not installed, or no cluster configuration was found."""


@dataclass(frozen=True)
class ContainerState:
    state: Literal["waiting", "running", "terminated"]
    reason: str = ""
    message: str = ""
    exit_code: int | None = None


@dataclass(frozen=True)
class PodState:
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    containers: Mapping[str, ContainerState] = field(default_factory=dict)  # init and app containers
    reason: str = ""  # the Pod's own reason/message, or the scheduler's

    def describe(self) -> str:
        parts = [self.phase] + ([self.reason] if self.reason else [])
        for name, c in self.containers.items():
            if c.reason or c.message:
                parts.append(f"{name}: {c.state} {c.reason} {c.message}".strip())
        return "; ".join(parts)


@dataclass(frozen=True)
class KubeObject:
    kind: str  # "pod" | "networkpolicy"
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


@dataclass(frozen=True)
class SelfPod:
    """The controller's own Pod, when it runs in the cluster."""

    name: str
    uid: str
    labels: Mapping[str, str]
    ip: str | None


class ExecChannel(ABC):
    """One command's streams. `read` returns what arrived as (STDOUT|STDERR, bytes) pairs."""

    @abstractmethod
    def write_stdin(self, data: bytes) -> None: ...

    @abstractmethod
    def close_stdin(self) -> None:
        """Send EOF (where the protocol has it; tar ends at its end-of-archive blocks anyway)."""

    @abstractmethod
    def read(self, timeout: float) -> list[tuple[int, bytes]]:
        """What arrived within `timeout` seconds ([] if nothing did)."""

    @abstractmethod
    def is_open(self) -> bool:
        """False once the command ended (and everything it printed was read) or the stream broke."""

    @abstractmethod
    def exit_code(self) -> int | None:
        """The command's exit code once closed; None when it is not known."""

    @abstractmethod
    def close(self) -> None: ...


class PodApi(ABC):
    """The few calls the backend makes, in one namespace."""

    namespace: str

    @abstractmethod
    def create_pod(self, manifest: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def pod_state(self, name: str) -> PodState | None:
        """None when there is no such Pod."""

    @abstractmethod
    def exec(self, pod: str, container: str, argv: list[str], *, stdin: bool) -> ExecChannel: ...

    @abstractmethod
    def delete_pod(self, name: str) -> bool:
        """Delete now (grace 0, dependents in the background); False when it was gone already."""

    @abstractmethod
    def pod_log(self, name: str, container: str) -> str: ...

    @abstractmethod
    def create_network_policy(self, manifest: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def delete_network_policy(self, name: str) -> bool: ...

    @abstractmethod
    def list_managed(self, label_selector: str) -> list[KubeObject]:
        """Pods and NetworkPolicies matching the selector, Pods first."""

    @abstractmethod
    def self_pod(self) -> SelfPod | None:
        """The controller's own Pod when it runs in the cluster, else None."""


# ---- the official client ---------------------------------------------------------------------


def _import_client() -> Any:
    try:
        import kubernetes
    except ImportError as exc:
        raise KubernetesUnavailableError(
            "sandbox.backend kubernetes needs the kubernetes Python client, which is not installed",
            fix=f"pip install '{EXTRA}'",
        ) from exc
    return kubernetes


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT_DIR / "token").is_file()


def load_configuration(kubernetes: Any) -> str | None:
    """Load in-cluster config or the kubeconfig, as the client resolves them; the namespace they imply."""
    try:
        if in_cluster():
            kubernetes.config.load_incluster_config()
            return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or None
        kubernetes.config.load_kube_config()
        _, context = kubernetes.config.list_kube_config_contexts()
    except (kubernetes.config.ConfigException, OSError, TypeError) as exc:
        raise KubernetesUnavailableError(
            f"no Kubernetes cluster configuration: {exc}",
            fix="set KUBECONFIG (or ~/.kube/config) to the cluster's, or run the controller in the cluster",
        ) from exc
    namespace = (context or {}).get("context", {}).get("namespace")
    return str(namespace) if namespace else None


def _reason(exc: Any) -> str:
    """The API server's message for an ApiException (its body is a Status object)."""
    try:
        body = json.loads(exc.body or "")
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except (TypeError, ValueError):
        pass
    return str(getattr(exc, "reason", "") or exc)


def map_api_error(exc: Any, action: str, namespace: str) -> Exception:
    """The error to raise for an ApiException (status 0: the server was not reached)."""
    status, reason = int(getattr(exc, "status", 0) or 0), _reason(exc)
    where = f"{action} in namespace {namespace}"
    if status == 401:
        return UserError(f"{where}: the cluster refused the credentials ({reason})",
                         fix="refresh the kubeconfig's credentials (or the controller's ServiceAccount token)")
    if status == 403 and "RuntimeClass" in reason:
        return UserError(f"{where}: {reason}",
                         fix="create the RuntimeClass (e.g. gvisor) or unset sandbox.runtime_class")
    if status == 403 and "forbidden" in reason.lower() and ("cannot" in reason or "User" in reason):
        return UserError(f"{where}: {reason}",
                         fix="bind the controller's ServiceAccount to the Role in deploy/kubernetes/role.yaml")
    if status == 403 or status == 422:
        return UserError(f"{where}: the cluster refused it: {reason}",
                         fix="check the namespace's admission policies and the sandbox: block")
    if status == 404 and "namespaces" in reason and "not found" in reason:
        return UserError(f"{where}: {reason}", fix="create the namespace (deploy/kubernetes/namespace.yaml) "
                                                   "or set sandbox.namespace")
    if status == 0:
        return SandboxError(f"{where}: the Kubernetes API server could not be reached ({reason})")
    return SandboxError(f"{where}: the Kubernetes API answered {status}: {reason}")


class _ClientExec(ExecChannel):
    """An exec over the client's WSClient, in binary mode."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        # The client keeps a copy of all output unless told otherwise (capture_all): drop it.
        ws._all = _Discard()

    def write_stdin(self, data: bytes) -> None:
        for start in range(0, len(data), STDIN_CHUNK):
            self._ws.write_stdin(data[start:start + STDIN_CHUNK])

    def close_stdin(self) -> None:
        self._ws.close_channel(0)

    def read(self, timeout: float) -> list[tuple[int, bytes]]:
        if self._ws.is_open():
            self._ws.update(timeout=timeout)
        out = []
        for channel in (STDOUT, STDERR):
            data = self._ws.read_channel(channel)
            if data:
                out.append((channel, data if isinstance(data, bytes) else data.encode()))
        return out

    def is_open(self) -> bool:
        return bool(self._ws.is_open())

    def exit_code(self) -> int | None:
        if self._ws.is_open():
            return None
        try:
            code = self._ws.returncode
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return None  # no status on the error channel: the stream broke off
        return int(code) if code is not None else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.close()


class _Discard:
    def write(self, data: Any) -> None:
        return None

    def getvalue(self) -> bytes:
        return b""


class ClientPodApi(PodApi):
    """`PodApi` on the official client. `core`, `networking` and `stream` may be given (tests fake them)."""

    def __init__(self, namespace: str | None = None, *, core: Any = None, networking: Any = None,
                 stream: Callable[..., Any] | None = None) -> None:
        if core is None or networking is None or stream is None:
            kubernetes = _import_client()
            implied = load_configuration(kubernetes)
            from kubernetes.stream import stream as client_stream

            core = core or kubernetes.client.CoreV1Api()
            networking = networking or kubernetes.client.NetworkingV1Api()
            stream = stream or client_stream
            namespace = namespace or implied
        self.namespace = namespace or "default"
        self._core, self._networking, self._stream = core, networking, stream
        self._client = _import_client().client

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except self._client.ApiException as exc:
            raise map_api_error(exc, action, self.namespace) from exc
        except (OSError, ValueError) as exc:  # urllib3/websocket transport errors
            raise SandboxError(f"{action} in namespace {self.namespace}: {type(exc).__name__}: {exc}") from exc

    def _missing(self, exc: Any) -> bool:
        return isinstance(exc, self._client.ApiException) and exc.status == 404

    def create_pod(self, manifest: Mapping[str, Any]) -> None:
        with self._errors(f"creating Pod {manifest['metadata']['name']}"):
            self._core.create_namespaced_pod(self.namespace, dict(manifest))

    def pod_state(self, name: str) -> PodState | None:
        with self._errors(f"reading Pod {name}"):
            try:
                pod = self._core.read_namespaced_pod(name, self.namespace)
            except self._client.ApiException as exc:
                if self._missing(exc):
                    return None
                raise
        return _pod_state(pod)

    def exec(self, pod: str, container: str, argv: list[str], *, stdin: bool) -> ExecChannel:
        with self._errors(f"starting a command in Pod {pod}"):
            ws = self._stream(
                self._core.connect_get_namespaced_pod_exec, pod, self.namespace, container=container,
                command=argv, stdin=stdin, stdout=True, stderr=True, tty=False, _preload_content=False,
                binary=True,
            )
        return _ClientExec(ws)

    def delete_pod(self, name: str) -> bool:
        options = self._client.V1DeleteOptions(grace_period_seconds=0, propagation_policy="Background")
        with self._errors(f"deleting Pod {name}"):
            try:
                self._core.delete_namespaced_pod(name, self.namespace, body=options)
            except self._client.ApiException as exc:
                if self._missing(exc):
                    return False
                raise
        return True

    def pod_log(self, name: str, container: str) -> str:
        with self._errors(f"reading the log of Pod {name}"):
            return str(self._core.read_namespaced_pod_log(name, self.namespace, container=container))

    def create_network_policy(self, manifest: Mapping[str, Any]) -> None:
        with self._errors(f"creating NetworkPolicy {manifest['metadata']['name']}"):
            self._networking.create_namespaced_network_policy(self.namespace, dict(manifest))

    def delete_network_policy(self, name: str) -> bool:
        options = self._client.V1DeleteOptions(propagation_policy="Background")
        with self._errors(f"deleting NetworkPolicy {name}"):
            try:
                self._networking.delete_namespaced_network_policy(name, self.namespace, body=options)
            except self._client.ApiException as exc:
                if self._missing(exc):
                    return False
                raise
        return True

    def list_managed(self, label_selector: str) -> list[KubeObject]:
        with self._errors("listing sandbox Pods and NetworkPolicies"):
            pods = self._core.list_namespaced_pod(self.namespace, label_selector=label_selector).items
            policies = self._networking.list_namespaced_network_policy(
                self.namespace, label_selector=label_selector).items
        return [_object("pod", item) for item in pods] + [_object("networkpolicy", item) for item in policies]

    def self_pod(self) -> SelfPod | None:
        name = os.environ.get("POD_NAME") or os.environ.get("HOSTNAME")
        if not in_cluster() or not name:
            return None
        with self._errors(f"reading the controller's own Pod {name}"):
            pod = self._core.read_namespaced_pod(name, self.namespace)
        meta = pod.metadata
        return SelfPod(name=meta.name, uid=meta.uid, labels=dict(meta.labels or {}),
                       ip=getattr(pod.status, "pod_ip", None))


def _object(kind: str, item: Any) -> KubeObject:
    meta = item.metadata
    return KubeObject(kind, meta.name, dict(meta.labels or {}), dict(meta.annotations or {}))


def _container_state(status: Any) -> ContainerState:
    state = status.state
    if state is None:
        return ContainerState("waiting")
    if state.running is not None:
        return ContainerState("running")
    if state.terminated is not None:
        t = state.terminated
        return ContainerState("terminated", t.reason or "", t.message or "", t.exit_code)
    waiting = state.waiting
    if waiting is None:
        return ContainerState("waiting")
    return ContainerState("waiting", waiting.reason or "", waiting.message or "")


def _pod_state(pod: Any) -> PodState:
    status = pod.status
    containers = {s.name: _container_state(s) for s in
                  [*(status.init_container_statuses or []), *(status.container_statuses or [])]}
    reason = " ".join(x for x in (status.reason, status.message) if x)
    if not reason:
        for condition in status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                reason = f"not scheduled: {condition.reason} {condition.message or ''}".strip()
    return PodState(status.phase or "Unknown", containers, reason)
