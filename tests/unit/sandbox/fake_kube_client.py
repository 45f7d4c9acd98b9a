"""A fake of the official client's API boundary (CoreV1Api, NetworkingV1Api, stream) for unit tests.

It keeps objects as the client's models (created from the request bodies),
answers reads with them, raises the client's ApiException as the API server
would, and serves exec as the client's WSClient does (binary channels, the
exit status on channel 3). Commands are answered by a handler the test gives.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kubernetes

from agent_eval_sandbox.sandbox import kubernetes_objects as ko

ApiException = kubernetes.client.ApiException


def api_error(status: int, message: str) -> ApiException:
    exc = ApiException(status=status, reason="x")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def _model(obj: dict[str, Any], kind: str) -> Any:
    return kubernetes.client.ApiClient().deserialize(json.dumps(obj), kind, "application/json")


@dataclass
class ExecCall:
    pod: str
    container: str
    command: list[str]
    stdin: bytes

    def tar_members(self) -> dict[str, bytes]:
        with tarfile.open(fileobj=io.BytesIO(self.stdin), mode="r|") as tar:
            return {m.name: (tar.extractfile(m).read() if m.isreg() else b"") for m in tar}  # type: ignore[union-attr]


Handler = Callable[[ExecCall], tuple[bytes, bytes, int | None]]  # stdout, stderr, exit code (None: broken)


def default_handler(call: ExecCall) -> tuple[bytes, bytes, int | None]:
    return b"", b"", 0


class FakeWS:
    """What `stream(..., _preload_content=False, binary=True)` returns, in its observable behaviour."""

    def __init__(self, call: ExecCall, handler: Handler, wants_stdin: bool) -> None:
        self.call, self._handler = call, handler
        self._stdin_open = wants_stdin
        self._channels: dict[int, bytes] = {}
        self._open = True
        self._code: int | None = None
        self.closed = False
        self._all: Any = None

    def write_stdin(self, data: bytes) -> None:
        assert isinstance(data, bytes), "stdin goes as bytes (binary frames)"
        self.call.stdin += data

    def close_channel(self, channel: int) -> None:
        assert channel == 0
        self._stdin_open = False

    def is_open(self) -> bool:
        return self._open

    def update(self, timeout: float = 0) -> None:
        if self._open and not self._stdin_open:
            out, err, self._code = self._handler(self.call)
            self._channels = {1: out, 2: err}
            self._open = False

    def read_channel(self, channel: int, timeout: float = 0) -> bytes:
        return self._channels.pop(channel, b"")

    @property
    def returncode(self) -> int:
        if self._code is None:
            raise KeyError("status")  # no status on the error channel: the stream broke off
        return self._code

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeCluster:
    namespace: str = "evals"
    handler: Handler = default_handler
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    execs: list[ExecCall] = field(default_factory=list)
    ready: set[str] = field(default_factory=set)
    logs: dict[str, str] = field(default_factory=dict)
    phase_after_create: str = "Succeeded"  # what a Pod without an init container (the probe) ends in
    fail_create: ApiException | None = None

    # ---- CoreV1Api

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any]) -> Any:
        self.calls.append(("create_namespaced_pod", (namespace, body)))
        if self.fail_create is not None:
            raise self.fail_create
        self.pods[body["metadata"]["name"]] = body
        return _model(body, "V1Pod")

    def read_namespaced_pod(self, name: str, namespace: str) -> Any:
        if name not in self.pods:
            raise api_error(404, f'pods "{name}" not found')
        body = dict(self.pods[name])
        if body["spec"].get("initContainers"):
            init_state = {"terminated": {"exitCode": 0}} if name in self.ready else {"running": {}}
            agent_state = {"running": {}} if name in self.ready else {"waiting": {"reason": "PodInitializing"}}
            body["status"] = {"phase": "Running" if name in self.ready else "Pending",
                              "initContainerStatuses": [{"name": "control", "state": init_state, "ready": False,
                                                         "restartCount": 0, "image": "i", "imageID": ""}],
                              "containerStatuses": [{"name": "agent", "state": agent_state, "ready": True,
                                                     "restartCount": 0, "image": "i", "imageID": ""}]}
        else:
            body["status"] = {"phase": self.phase_after_create}
        return _model(body, "V1Pod")

    def delete_namespaced_pod(self, name: str, namespace: str, body: Any = None) -> Any:
        self.calls.append(("delete_namespaced_pod", (name, namespace, body)))
        if self.pods.pop(name, None) is None:
            raise api_error(404, f'pods "{name}" not found')

    def _select(self, objects: dict[str, dict[str, Any]], selector: str) -> list[dict[str, Any]]:
        wanted = dict(pair.split("=", 1) for pair in selector.split(","))
        return [o for o in objects.values() if all(o["metadata"]["labels"].get(k) == v for k, v in wanted.items())]

    def list_namespaced_pod(self, namespace: str, label_selector: str = "") -> Any:
        self.calls.append(("list_namespaced_pod", (namespace, label_selector)))
        return _model({"items": self._select(self.pods, label_selector)}, "V1PodList")

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str) -> str:
        return self.logs.get(name, "")

    def connect_get_namespaced_pod_exec(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("exec goes through stream()")

    # ---- NetworkingV1Api

    def create_namespaced_network_policy(self, namespace: str, body: dict[str, Any]) -> Any:
        self.calls.append(("create_namespaced_network_policy", (namespace, body)))
        self.policies[body["metadata"]["name"]] = body
        return _model(body, "V1NetworkPolicy")

    def delete_namespaced_network_policy(self, name: str, namespace: str, body: Any = None) -> Any:
        self.calls.append(("delete_namespaced_network_policy", (name, namespace, body)))
        if self.policies.pop(name, None) is None:
            raise api_error(404, f'networkpolicies "{name}" not found')

    def list_namespaced_network_policy(self, namespace: str, label_selector: str = "") -> Any:
        self.calls.append(("list_namespaced_network_policy", (namespace, label_selector)))
        return _model({"items": self._select(self.policies, label_selector)}, "V1NetworkPolicyList")

    # ---- kubernetes.stream.stream

    def stream(self, method: Any, name: str, namespace: str, **kwargs: Any) -> FakeWS:
        assert method == self.connect_get_namespaced_pod_exec
        assert kwargs["binary"] is True and kwargs["_preload_content"] is False and kwargs["tty"] is False
        if name not in self.pods:
            raise api_error(404, f'pods "{name}" not found')
        call = ExecCall(name, kwargs["container"], list(kwargs["command"]), b"")
        self.execs.append(call)
        if call.command[-1] == ko.READY_FILE:
            self.ready.add(name)
        return FakeWS(call, self.handler, kwargs["stdin"])
