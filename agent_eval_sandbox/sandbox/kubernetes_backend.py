"""The Kubernetes backend: one hardened Pod per case, a NetworkPolicy per run, and their cleanup.

A run (`prepare_run`, or the first `create`) starts the relay (the TCP front
door to the cases' gateway and broker sockets, `sandbox/relay.py`), creates
the run's NetworkPolicy (no ingress; egress to the relay's port only) and,
unless told `allow_unenforced_network`, checks once that the cluster enforces
it: a probe Pod under the policy must reach the relay and must not reach a
second port of the controller nor the API server's in-cluster address.

A case (`create`) registers its channel directory with the relay (its
token), creates its Pod (`sandbox/kubernetes_objects.py`), copies what Docker
bind-mounts into the Pod's read-only control volumes through the init
container, with the relay file that names the token, and returns once the
agent container runs. Every object carries the run's labels and annotations
(owner, deadline) for `destroy_run`, the reaper and `gc`, and, in-cluster, an
ownerReference to the controller's Pod so the cluster removes orphans itself.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from agent_eval_sandbox.config.models import SandboxConfig
from agent_eval_sandbox.errors import RuntimeNotRegisteredError, UserError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.inside.controller_link import RELAY_FILE_NAME
from agent_eval_sandbox.sandbox import kubernetes_objects as ko
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.archive import tar_from_dir, tar_from_files
from agent_eval_sandbox.sandbox.base import RemovedObject, SandboxBackend, SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.kubernetes_api import ClientPodApi, PodApi, PodState
from agent_eval_sandbox.sandbox.kubernetes_sandbox import KubernetesSandbox, put_tar, touch
from agent_eval_sandbox.sandbox.relay import Relay

# Pulling a large image onto a fresh node takes minutes.
START_TIMEOUT_S = 300.0
PROBE_TIMEOUT_S = 180.0
_POLL_S = 0.5
# Container waiting reasons that will not go away by waiting.
FATAL_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                           "CreateContainerError", "RunContainerError", "ErrImageNeverPull"})


class NetworkNotEnforcedError(UserError):
    """The cluster does not enforce the run's NetworkPolicy."""


def settings_of(config: SandboxConfig, namespace: str) -> ko.KubeSettings:
    return ko.KubeSettings(
        namespace=namespace,
        runtime_class=config.runtime_class,
        node_selector=dict(config.node_selector),
        tolerations=tuple(t.manifest() for t in config.tolerations),
        image_pull_secrets=tuple(config.image_pull_secrets),
    )


def _tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class KubernetesBackend(SandboxBackend):
    name = "kubernetes"
    mounts_are_live = False  # `create` copies the mounts' sources into the Pod: nothing is made ahead

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        api: PodApi | None = None,
        allow_unenforced_network: bool = False,
        owner: L.Owner | None = None,
        grace_s: float = L.DEFAULT_GRACE_S,
        relay: Relay | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self._config = config or SandboxConfig.model_validate({"backend": "kubernetes", "image": "unused"})
        self._api_arg = api
        self._allow_unenforced = allow_unenforced_network
        self._owner = owner
        self._grace_s = grace_s
        self._relay = relay
        self._start_timeout_s = start_timeout_s
        self._warn = warn or (lambda message: None)
        self._lock = threading.Lock()
        self._runs: dict[str, ko.ControllerPeer] = {}
        self._peer: ko.ControllerPeer | None = None
        self._owners: tuple[ko.OwnerRef, ...] | None = None

    @property
    def api(self) -> PodApi:
        # The client loads its configuration on first use, not when the backend is chosen.
        if self._api_arg is None:
            self._api_arg = ClientPodApi(self._config.namespace)
        return self._api_arg

    @property
    def settings(self) -> ko.KubeSettings:
        return settings_of(self._config, self.api.namespace)

    def _annotations(self, run_id: str, case_id: str, deadline_epoch: float) -> dict[str, str]:
        return L.object_labels(run_id=run_id, case_id=case_id, owner=self._owner or L.current_owner(),
                               deadline_epoch=deadline_epoch)

    # ---- the run ----------------------------------------------------------------------------

    def _controller(self) -> tuple[ko.ControllerPeer, tuple[ko.OwnerRef, ...]]:
        """Where Pods reach the relay (resolved here: the Pods need no DNS), and what owns them."""
        if self._peer is not None and self._owners is not None:
            return self._peer, self._owners
        relay = self._ensure_relay()
        me = self.api.self_pod()
        owners = (ko.OwnerRef(me.name, me.uid),) if me is not None else ()
        host = self._config.controller.host or os.environ.get("AGENT_EVAL_CONTROLLER_HOST")
        if host:
            try:
                address = socket.gethostbyname(host)
            except OSError as exc:
                raise UserError(f"sandbox.controller.host {host!r} does not resolve here: {exc}",
                                fix="name the controller's Service, or give an IP address the Pods can reach") from exc
        elif me is not None and me.ip:
            address = me.ip
        else:
            raise UserError("the controller runs outside the cluster and sandbox.controller.host is not set",
                            fix="set sandbox.controller.host to an address of this machine the Pods can reach, or "
                                "run the controller in the cluster (deploy/kubernetes/)")
        ipaddress.ip_address(address)  # gethostbyname gives an IPv4 address
        self._peer = ko.ControllerPeer(address, relay.port, me.labels if me is not None else None)
        self._owners = owners
        return self._peer, owners

    def _ensure_relay(self) -> Relay:
        if self._relay is None:
            self._relay = Relay(self._config.controller.listen, self._config.controller.port)
        return self._relay.start()

    def _ensure_run(self, run_id: str) -> ko.ControllerPeer:
        with self._lock:
            known = self._runs.get(run_id)
            if known is not None:
                return known
            peer, owners = self._controller()
            name = ko.dns_name(run_id, suffix="sandbox")
            policy = ko.network_policy(run_id, name=name, settings=self.settings, peer=peer,
                                       annotations=self._annotations(run_id, "", time.time() + 86400),
                                       owners=owners)
            self.api.create_network_policy(policy)
            self._runs[run_id] = peer
            return peer

    def prepare_run(self, run_id: str) -> None:
        peer = self._ensure_run(run_id)
        if self._allow_unenforced:
            self._warn("--allow-unenforced-network: the cluster's enforcement of the run's NetworkPolicy is not "
                       "checked; a case Pod may reach more than the controller")
            return
        self.check_network(run_id, peer)

    def check_network(self, run_id: str, peer: ko.ControllerPeer) -> None:
        """Raise NetworkNotEnforcedError unless a Pod under the run's policy is confined by it."""
        canary = socket.create_server((self._config.controller.listen, 0))
        try:
            forbidden = [f"{peer.address}:{canary.getsockname()[1]}"]
            api_host, api_port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
            if api_host and api_port:  # the API server's in-cluster address: never a public one
                forbidden.append(f"{api_host}:{api_port}")
            allowed = f"{peer.address}:{peer.port}"
            result = self._run_probe(run_id, [allowed, *forbidden])
        finally:
            canary.close()
        if not result.get(allowed):
            raise SandboxError(f"the network probe Pod could not reach the controller's relay at {allowed}: check "
                               "sandbox.controller and the Service in front of the controller")
        reached = [target for target in forbidden if result.get(target)]
        if reached:
            raise NetworkNotEnforcedError(
                f"the cluster does not enforce NetworkPolicy in namespace {self.api.namespace}: a probe Pod under "
                f"the run's policy reached {', '.join(reached)}",
                fix="use a CNI that enforces NetworkPolicy (Calico, Cilium, …), or pass --allow-unenforced-network "
                    "(never for untrusted skills)",
            )

    def _run_probe(self, run_id: str, targets: list[str]) -> dict[str, bool]:
        _, owners = self._controller()
        name = ko.dns_name(run_id, suffix=f"probe-{os.urandom(3).hex()}")
        pod = ko.probe_pod(run_id, name=name, image=self._config.image or "", settings=self.settings,
                           targets=targets, annotations=self._annotations(run_id, "", time.time() + 600),
                           owners=owners)
        self.api.create_pod(pod)
        try:
            end = time.monotonic() + PROBE_TIMEOUT_S
            while True:
                state = self.api.pod_state(name)
                if state is not None and state.phase in ("Succeeded", "Failed"):
                    break
                if state is not None:
                    _raise_if_stuck(name, state)
                if time.monotonic() > end:
                    raise SandboxError(f"the network probe Pod {name} did not finish within {PROBE_TIMEOUT_S:g} s"
                                       + (f" ({state.describe()})" if state else ""))
                time.sleep(_POLL_S)
            log_text = self.api.pod_log(name, "probe")
        finally:
            self.api.delete_pod(name)
        for line in reversed(log_text.splitlines()):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                return {str(k): bool(v) for k, v in data.items()}
        raise SandboxError(f"the network probe Pod {name} printed no result: {log_text[-300:]!r}")

    # ---- a case -----------------------------------------------------------------------------

    def create(self, spec: SandboxSpec) -> KubernetesSandbox:
        peer = self._ensure_run(spec.run_id)
        relay = self._ensure_relay()
        name = ko.dns_name(spec.run_id, spec.case_id, suffix=os.urandom(3).hex())
        sources = {m.source: m.source.is_dir() for m in spec.mounts}
        plan = ko.plan_mounts(spec, sources)
        sizes = {v.name: sum(_tree_bytes(src) for src, _ in v.entries) for v in plan.volumes}
        run_volume = plan.volume_at(paths.RUN_DIR)
        token: str | None = None
        if run_volume is not None:
            channel_dir = next(src for src, inside in run_volume.entries if inside is None)
            token = relay.register(channel_dir, spec.case_id)

        def release() -> None:
            if token is not None:
                relay.revoke(token)

        _, owners = self._controller()
        manifest = ko.case_pod(spec, name=name, settings=self.settings, plan=plan, control_bytes=sizes,
                               annotations=self._annotations(spec.run_id, spec.case_id, spec.deadline_epoch),
                               owners=owners, active_deadline_s=int(spec.deadline_epoch - time.time()))
        created = False
        try:
            self.api.create_pod(manifest)
            created = True
            self._wait(name, ko.CONTROL)
            for volume in plan.volumes:
                self._fill(name, volume, peer, token if volume is run_volume else None)
            try:
                touch(self.api, name, ko.CONTROL, ko.READY_FILE)
            except SandboxError as exc:
                # The control container exits the moment it sees the file, and may be gone before the exec
                # that wrote it reports: if the agent's container starts, the hand-over happened.
                handover: SandboxError | None = exc
            else:
                handover = None
            try:
                self._wait(name, ko.AGENT)
            except SandboxError as exc:
                raise (handover or exc) from None
            sandbox = KubernetesSandbox(self.api, replace(spec), name=name, on_destroy=release)
            for mount in plan.writable_files:
                parent, _, leaf = mount.target.rpartition("/")
                sandbox.copy_in_files({leaf: mount.source.read_bytes()}, parent or "/")
        except BaseException:
            try:
                if created:
                    self.api.delete_pod(name)
            finally:
                release()
            raise
        return sandbox

    def _fill(self, pod: str, volume: ko.ControlVolume, peer: ko.ControllerPeer, token: str | None) -> None:
        uid = ko.CONTROL_UID
        for source, inside in volume.entries:
            if inside is None:
                put_tar(self.api, pod, ko.CONTROL, volume.fill_path,
                        lambda out, s=source: tar_from_dir(s, out, uid=uid, gid=uid))  # type: ignore[misc]
            else:
                content = source.read_bytes()
                put_tar(self.api, pod, ko.CONTROL, volume.fill_path,
                        lambda out, n=inside, c=content: tar_from_files({n: c}, out, uid=uid, gid=uid))  # type: ignore[misc]
        if token is not None:
            relay_file = json.dumps({"host": peer.address, "port": peer.port, "token": token}).encode()
            put_tar(self.api, pod, ko.CONTROL, volume.fill_path,
                    lambda out: tar_from_files({RELAY_FILE_NAME: relay_file}, out, uid=uid, gid=uid))

    def _wait(self, pod: str, container: str) -> None:
        """Until `container` runs; SandboxError when the Pod cannot get there."""
        end = time.monotonic() + self._start_timeout_s
        state: PodState | None = None
        while time.monotonic() < end:
            state = self.api.pod_state(pod)
            if state is None:
                raise SandboxError(f"sandbox Pod {pod} vanished while starting")
            current = state.containers.get(container)
            if current is not None and current.state == "running":
                return
            if state.phase in ("Failed", "Succeeded") or (current is not None and current.state == "terminated"):
                raise SandboxError(f"sandbox Pod {pod} ended while starting ({state.describe()})")
            _raise_if_stuck(pod, state)
            time.sleep(_POLL_S)
        raise SandboxError(f"sandbox Pod {pod} did not start within {self._start_timeout_s:g} s"
                           + (f" ({state.describe()})" if state else ""))

    def check_runtime(self, name: str) -> None:
        raise RuntimeNotRegisteredError(
            f"sandbox.runtime {name!r} names a Docker runtime; Pods choose theirs by RuntimeClass",
            fix="set sandbox.runtime_class (e.g. gvisor) and unset sandbox.runtime",
        )

    # ---- cleanup ------------------------------------------------------------------------------

    def _remove_all(self, selector: str, reason_of: Callable[[Mapping[str, str]], str | None]) -> list[RemovedObject]:
        removed = []
        for obj in self.api.list_managed(selector):
            reason = reason_of(obj.annotations)
            if reason is None:
                continue
            gone = self.api.delete_pod(obj.name) if obj.kind == "pod" else self.api.delete_network_policy(obj.name)
            if gone:
                removed.append(RemovedObject(obj.kind, obj.name, obj.annotations.get(L.RUN_ID),
                                             obj.annotations.get(L.CASE_ID) or None, reason))
        return removed

    def destroy_run(self, run_id: str) -> list[RemovedObject]:
        with self._lock:
            self._runs.pop(run_id, None)
        return self._remove_all(ko.run_selector(run_id), lambda _: f"teardown of run {run_id}")

    def reap_orphans(self) -> list[RemovedObject]:
        hostname, now = socket.gethostname(), time.time()
        return self._remove_all(ko.MANAGED_SELECTOR, lambda annotations: L.orphan_reason(
            annotations, now=now, hostname=hostname, start_time_of=L.proc_start_time, grace_s=self._grace_s))

    def gc(self, *, all: bool = False) -> list[RemovedObject]:
        if not all:
            return self.reap_orphans()
        return self._remove_all(ko.MANAGED_SELECTOR, lambda _: "gc --all")

    def close(self) -> None:
        """Stop the relay (the process's exit does it otherwise)."""
        if self._relay is not None:
            self._relay.close()


def _raise_if_stuck(pod: str, state: PodState) -> None:
    for name, container in state.containers.items():
        if container.state == "waiting" and container.reason in FATAL_WAITING:
            raise SandboxError(f"sandbox Pod {pod}: container {name} cannot start: {container.reason} "
                               f"{container.message}".strip())

