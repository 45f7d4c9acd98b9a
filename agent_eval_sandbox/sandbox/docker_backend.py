"""The Docker backend: hardened containers on the docker SDK, and their cleanup."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import docker
import docker.errors
from docker.types import DriverConfig, LogConfig, Mount, Ulimit

from agent_eval_sandbox.errors import ImageError, RuntimeNotRegisteredError
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox import lifeline as lifeline_
from agent_eval_sandbox.sandbox.base import (
    BindMount,
    RemovedObject,
    SandboxBackend,
    SandboxSpec,
)
from agent_eval_sandbox.sandbox.docker_errors import connect, docker_errors
from agent_eval_sandbox.sandbox.docker_host import OwnContainer, in_a_container, own_container, probe_visible
from agent_eval_sandbox.sandbox.docker_sandbox import (
    DockerSandbox,
    force_remove_container,
    removal_in_progress,
    remove_container,
)
from agent_eval_sandbox.sandbox.held_dirs import HeldDir
from agent_eval_sandbox.sandbox.host_paths import (
    HostPaths,
    candidates_note,
    daemon_path,
    missing_mount_error,
    remote_daemon,
    remote_daemon_error,
    shared_root,
)
from agent_eval_sandbox.sandbox.runtimes import on_host_kernel


class _Object(NamedTuple):
    kind: str  # "container" | "volume"
    ident: str
    name: str
    labels: Mapping[str, str]


def tmpfs_volume_options(size_bytes: int, uid: int, gid: int) -> dict[str, str]:
    """A size-capped tmpfs the archive API can reach (unlike `--tmpfs`); it lives as long as the container."""
    return {
        "type": "tmpfs",
        "device": "tmpfs",
        "o": f"size={size_bytes},uid={uid},gid={gid},mode=0755,nosuid,nodev",
    }


def tmpfs_volume_mounts(spec: SandboxSpec, labels: Mapping[str, str]) -> list[Mount]:
    """The workspace and $HOME: tmpfs volumes the daemon makes with the container and removes with it
    (anonymous, labelled as the run's): no volume calls of their own, ~8 ms of CPU less a volume
    between the daemon and the controller, and a container removal never leaves them behind."""
    h, lim = spec.hardening, spec.limits
    return [
        Mount(target, None, type="volume", no_copy=True, labels={**labels, L.ROLE: role},
              driver_config=DriverConfig("local", tmpfs_volume_options(size, h.uid, h.gid)))
        for role, target, size in (("workspace", spec.workspace, lim.workspace_bytes),
                                   ("home", spec.home, lim.home_bytes))
    ]


# The window over which the CPU limit holds: `sandbox.cpus` CPUs' worth of time in each 500 ms.
# Docker's `--cpus` uses 100 ms windows, and the CLI starts in bursts of more than one core
# between waits on the model: in 100 ms windows a 1-CPU sandbox is throttled in nearly every
# burst and its unused time is lost while it waits. Measured on a 2-core machine, the CLI's
# trivial case in a 1-CPU sandbox: 0.82 s with 100 ms windows, 0.72 s with 500 ms or 1 s windows,
# as with 2 CPUs. The average still holds over every window; a sandbox can only run on more than
# `cpus` cores for part of one.
CPU_PERIOD_US = 500_000


# The mount points of cgroup v1 hierarchies (the kernel's controllers, the usual co-mounts, systemd's
# named hierarchy, a hybrid layout's v2 one). A runtime skips the paths a host does not have.
CGROUP_HIERARCHIES = ("blkio", "cpu", "cpuacct", "cpu,cpuacct", "cpuset", "devices", "freezer", "hugetlb", "memory",
                      "misc", "net_cls", "net_prio", "net_cls,net_prio", "perf_event", "pids", "rdma", "systemd",
                      "unified")
# Docker's own read-only paths (its OCI defaults, which a container's ReadonlyPaths replaces), then the
# cgroup hierarchies: crun on a cgroup v1 host mounts their tmpfs writable by everyone (mode 1777,
# 1 MiB), a place to write outside the sandbox's volumes where runc leaves it root's. crun makes the
# read-only /sys/fs/cgroup by binding it with its sub-mounts and drops their read-only flag as it
# does, so each hierarchy is listed as well: without them a sandbox user 0 could raise its own
# memory, pids and CPU limits (found by the red team, eleventh round).
# tests/integration/sandbox/test_sandbox_hardening.py checks the daemon's defaults are all here.
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
                  "/sys/fs/cgroup", *(f"/sys/fs/cgroup/{hierarchy}" for hierarchy in CGROUP_HIERARCHIES))


def host_config(api: docker.APIClient, spec: SandboxSpec, labels: Mapping[str, str],
                extra_mounts: tuple[BindMount, ...] = (), host: HostPaths | None = None) -> dict[str, Any]:
    """The HostConfig of a spec's container: `host_config_args`, and what docker-py has no argument for."""
    config: dict[str, Any] = api.create_host_config(**host_config_args(spec, labels, extra_mounts, host))
    config["ReadonlyPaths"] = list(READONLY_PATHS)
    return config


def host_config_args(
    spec: SandboxSpec, labels: Mapping[str, str], extra_mounts: tuple[BindMount, ...] = (),
    host: HostPaths | None = None,
) -> dict[str, Any]:
    """Arguments of `create_host_config` for a spec; `labels` are the sandbox's (its volumes carry
    them too); `host` spells the bind mounts' sources as the daemon knows them."""
    h, lim = spec.hardening, spec.limits
    to_daemon = host.for_daemon if host is not None else (lambda path: path)
    mounts = tmpfs_volume_mounts(spec, labels)
    mounts += [Mount(m.target, str(to_daemon(m.source)), type="bind", read_only=m.read_only)
               for m in (*spec.mounts, *extra_mounts)]
    return {
        "cap_drop": list(h.cap_drop),
        "cap_add": list(h.cap_add) or None,
        "security_opt": ["no-new-privileges"] if h.no_new_privileges else None,
        "read_only": h.read_only_root,
        "init": h.init,
        "network_mode": h.network,
        "runtime": h.runtime,
        "pids_limit": lim.pids,
        "mem_limit": lim.memory_bytes,
        "memswap_limit": lim.memory_bytes,  # equal to the memory limit: no swap
        "cpu_period": CPU_PERIOD_US,
        "cpu_quota": cpu_quota_us(lim.cpus),
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={lim.tmp_bytes},mode=1777"},
        "mounts": mounts,
        "ulimits": [Ulimit(name="core", soft=0, hard=0)],
        "log_config": LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
    }


def cpu_quota_us(cpus: float) -> int:
    """The CPU time a sandbox may use in each window; Docker takes no less than 1 ms."""
    return max(1000, round(cpus * CPU_PERIOD_US))


def no_network(spec: SandboxSpec) -> bool:
    """Whether Docker may skip the network set-up entirely: a sandbox with no network gets none."""
    return spec.hardening.network == "none"


# Docker writes /etc/hosts only for a container it gives a network; without one, `localhost` must
# still resolve for the agent's tools (a test server on loopback, say), as it would under `--network none`.
HOSTS_IN_SANDBOX = "/etc/hosts"
LOOPBACK_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


def loopback_hosts_file(directory: Path) -> BindMount:
    """A read-only /etc/hosts of the loopback names, written in `directory` (which the daemon must see)."""
    path = directory / "hosts"
    path.write_text(LOOPBACK_HOSTS)
    path.chmod(0o644)
    return BindMount(path, HOSTS_IN_SANDBOX)


class DockerBackend(SandboxBackend):
    name = "docker"
    mounts_are_live = True  # bind mounts

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        owner: L.Owner | None = None,
        grace_s: float = L.DEFAULT_GRACE_S,
    ) -> None:
        self._client_arg = client
        self._owner = owner
        self._grace_s = grace_s
        self._runtimes: set[str] | None = None
        self._default_runtime: str | None = None
        self._host: HostPaths | None = None
        self._own: tuple[OwnContainer | None] | None = None  # found on first need

    @property
    def client(self) -> docker.DockerClient:
        # Connecting talks to the daemon, so it waits for the first real use.
        if self._client_arg is None:
            self._client_arg = connect()
        return self._client_arg

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        api = self.client.api
        h = spec.hardening
        if h.runtime:
            self.check_runtime(h.runtime)
        name = L.object_name(spec.run_id, spec.case_id)
        own = self.own_container()
        labels = L.object_labels(
            run_id=spec.run_id,
            case_id=spec.case_id,
            owner=self._owner or L.current_owner(),
            deadline_epoch=spec.deadline_epoch,
            extra=spec.extra_labels,
            container=own.id if own is not None else None,
        )
        on_host_kernel = self.runs_on_host_kernel(spec)
        container_id: str | None = None
        lifeline: lifeline_.Lifeline | None = None
        # Only for /etc/hosts: Docker writes none for a container it gives no network.
        host_dir = self._host_dir() if no_network(spec) else None
        try:
            extra_mounts = [loopback_hosts_file(host_dir.path)] if host_dir is not None else []
            with docker_errors(f"creating sandbox {name}"):
                try:
                    container_id = api.create_container(
                        spec.image,
                        # It lives as long as this process holds its stdin: see sandbox/lifeline.py.
                        command=list(lifeline_.MAIN_COMMAND),
                        name=name,
                        user=lifeline_.MAIN_USER,
                        stdin_open=True,  # and, the SDK adds, closed when the lifeline lets go
                        environment={**spec.env, "HOME": spec.home},
                        working_dir=spec.workspace,
                        labels=labels,
                        # Still a network namespace of its own with loopback only, but no libnetwork
                        # endpoint: that saves a hook run and about half the cost of a container's start.
                        network_disabled=no_network(spec),
                        host_config=host_config(api, spec, labels, tuple(extra_mounts), self._host),
                    )["Id"]
                except docker.errors.ImageNotFound as exc:
                    raise ImageError(
                        f"the sandbox image {spec.image} is not present in the Docker daemon",
                        fix="run `agent-eval-sandbox image build`, or set sandbox.image to an existing image",
                    ) from exc
                lifeline = lifeline_.Lifeline.attach(api, container_id)
                api.start(container_id)
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to report
                remove_container(api, container_id)
            if lifeline is not None:
                lifeline.close()
            if host_dir is not None:
                host_dir.release()
            raise
        sandbox = DockerSandbox(self.client, spec, container_id=container_id, name=name, lifeline=lifeline,
                                host_dir=host_dir, on_host_kernel=on_host_kernel)
        sandbox.stand_by()
        return sandbox

    def _host_dir(self) -> HeldDir:
        """A sandbox's own directory of host files it mounts: under the run's HostPaths root once
        `host_paths` chose it (the daemon must see it), else in the temp directory."""
        base = self._host.base if self._host is not None else Path(tempfile.gettempdir())
        held = HeldDir(base, "aes-etc-")
        try:
            held.path.chmod(0o755)  # the sandbox's users read what it holds
        except BaseException:
            held.release()
            raise
        return held

    def _daemon_runtimes(self) -> set[str]:
        if self._runtimes is None:
            with docker_errors("listing container runtimes"):
                info = self.client.api.info()
            self._runtimes = set(info.get("Runtimes") or {})
            self._default_runtime = info.get("DefaultRuntime") or None
        return self._runtimes

    def runs_on_host_kernel(self, spec: SandboxSpec) -> bool:
        """Whether the spec's sandbox runs on the host's kernel (runc, crun): its runtime, or the
        daemon's default one (a daemon may default to gVisor)."""
        if spec.hardening.runtime is None:
            self._daemon_runtimes()
        runtime = spec.hardening.runtime or self._default_runtime
        return runtime is not None and on_host_kernel(runtime)  # a daemon that names no default: assume nothing

    def check_runtime(self, name: str) -> None:
        if name not in self._daemon_runtimes():
            raise RuntimeNotRegisteredError(
                f"container runtime {name!r} is not registered with the Docker daemon "
                f"(registered: {', '.join(sorted(self._daemon_runtimes())) or 'none'})",
                # Plain `runsc install` is not enough: the sandbox has no network of runsc's making
                # and must reach the gateway's unix socket.
                fix=("run scripts/install-crun.sh (it registers crun and reloads dockerd)" if name == "crun" else
                     "register it in /etc/docker/daemon.json and reload dockerd (for gVisor: "
                     f"`runsc install --runtime={name} -- --network=none --host-uds=open`, as "
                     "scripts/install-gvisor.sh does)") + ", or unset sandbox.runtime",
            )

    # ---- where the sandboxes' host files live -----------------------------------------

    def own_container(self) -> OwnContainer | None:
        """The container this controller runs in, if this daemon runs it (looked up once)."""
        if self._own is None:
            self._own = (own_container(self.client.api),)
        return self._own[0]

    def host_paths(self, shared_dir: Path | None, runs_base: Path) -> HostPaths:
        docker_host = os.environ.get("DOCKER_HOST", "")
        remote = remote_daemon(docker_host)
        if remote is not None:  # before any connection: no request goes to that machine
            raise remote_daemon_error(docker_host, remote)
        own = self.own_container()
        in_container = in_a_container(own)
        root = shared_root(shared_dir, runs_base, in_container=in_container, tmp=Path(tempfile.gettempdir()))
        mounts = own.mounts if own is not None else ()
        if own is not None and daemon_path(PurePosixPath(root), mounts) is None:
            raise missing_mount_error(root, why=candidates_note(mounts))
        self._host = HostPaths.at(root, mounts, in_container=in_container)
        return self._host

    def check_host_paths(self, host: HostPaths, image: str) -> None:
        if not host.in_container:
            return  # on the daemon's host its paths are ours
        own = self.own_container()
        why = probe_visible(self.client.api, image, host.root, host.for_daemon(host.root),
                            self._owner or L.current_owner(), own.id if own is not None else None)
        if why is not None:
            raise missing_mount_error(host.root, why=why)

    # ---- cleanup ------------------------------------------------------------------

    def _managed(self, *label_filters: str) -> list[_Object]:
        """Managed objects matching all label filters, containers first (they hold the volumes)."""
        filters = {"label": [L.MANAGED_FILTER, *label_filters]}
        api = self.client.api
        with docker_errors("listing sandboxes"):
            containers = api.containers(all=True, filters=filters)
            volumes = api.volumes(filters=filters).get("Volumes") or []
        found = [
            _Object("container", c["Id"], (c.get("Names") or [c["Id"][:12]])[0].lstrip("/"), c.get("Labels") or {})
            for c in containers
        ]
        found += [_Object("volume", v["Name"], v["Name"], v.get("Labels") or {}) for v in volumes]
        return found

    def _remove_all(
        self, objects: list[_Object], reason_of: Callable[[Mapping[str, str]], str | None]
    ) -> list[RemovedObject]:
        api = self.client.api
        removed = []
        # A sandbox's volumes go with its container: those of the containers removed here are reported
        # with them; any other volume (its container removed without them) is removed on its own.
        emptied: set[tuple[str | None, str | None]] = set()
        for obj in objects:
            reason = reason_of(obj.labels)
            if reason is None:
                continue
            owner = (obj.labels.get(L.RUN_ID), obj.labels.get(L.CASE_ID))
            with docker_errors(f"removing {obj.kind} {obj.name}"):
                try:
                    if obj.kind == "container":
                        force_remove_container(api, obj.ident)
                        emptied.add(owner)
                    else:
                        api.remove_volume(obj.ident)
                except docker.errors.NotFound:
                    if not (obj.kind == "volume" and owner in emptied):
                        continue  # removed meanwhile, e.g. by its own sandbox's destroy()
                except docker.errors.APIError as exc:
                    if (obj.kind == "volume" and exc.status_code == 409) or removal_in_progress(exc):
                        # A volume in use by a container that is kept goes with it; a container whose removal
                        # is in progress (its own sandbox's destroy, racing a SIGTERM's teardown) is going.
                        continue
                    raise
            removed.append(
                RemovedObject(obj.kind, obj.name, obj.labels.get(L.RUN_ID), obj.labels.get(L.CASE_ID), reason)
            )
        return removed

    def destroy_run(self, run_id: str) -> list[RemovedObject]:
        return self._remove_all(self._managed(f"{L.RUN_ID}={run_id}"), lambda _: f"teardown of run {run_id}")

    def reap_orphans(self) -> list[RemovedObject]:
        hostname, now = socket.gethostname(), time.time()
        own = self.own_container()
        running = functools.cache(self._container_running)  # one question per controller container
        return self._remove_all(
            self._managed(),
            lambda labels: L.orphan_reason(
                labels, now=now, hostname=hostname, start_time_of=L.proc_start_time, grace_s=self._grace_s,
                own_container=own.id if own is not None else None, container_running=running,
            ),
        )

    def _container_running(self, container_id: str) -> bool:
        with docker_errors(f"inspecting container {container_id[:12]}"):
            try:
                return bool(self.client.api.inspect_container(container_id)["State"].get("Running"))
            except docker.errors.NotFound:
                return False

    def gc(self, *, all: bool = False) -> list[RemovedObject]:
        if not all:
            return self.reap_orphans()
        return self._remove_all(self._managed(), lambda _: "gc --all")
