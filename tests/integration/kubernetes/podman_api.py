"""`PodApi` on Debian's podman: the generated Pods run for real with `podman kube play`.

No API server or kubelet can run on these machines; podman is the closest
thing that runs a Pod manifest as it is (init container, per-container users,
read-only root and mounts, capabilities, seccomp, resource limits). What it
does not do, the tests do not claim: it enforces no NetworkPolicy (so the
objects are only recorded here), ignores `medium: Memory` and `sizeLimit` on
emptyDirs, and has no Service network, so a Pod reaches the test's relay on
the host's loopback (`hostNetwork`, set here only).
"""

from __future__ import annotations

import copy
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from agent_eval_sandbox.sandbox.kubernetes_api import (
    STDERR,
    STDOUT,
    ContainerState,
    ExecChannel,
    KubeObject,
    PodApi,
    PodState,
    SelfPod,
)

# The default rlimits of Debian's podman are refused on these machines.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'


def podman_env(conf_dir: Path) -> dict[str, str]:
    conf = conf_dir / "containers.conf"
    if not conf.exists():
        conf.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


class _PodmanExec(ExecChannel):
    def __init__(self, argv: list[str], env: Mapping[str, str], stdin: bool) -> None:
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env))
        self._queue: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self._readers = [threading.Thread(target=self._pump, args=(stream, channel), daemon=True)
                         for stream, channel in ((self._proc.stdout, STDOUT), (self._proc.stderr, STDERR))]
        for reader in self._readers:
            reader.start()

    def _pump(self, stream: Any, channel: int) -> None:
        while chunk := stream.read1(65536):
            self._queue.put((channel, chunk))

    def write_stdin(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)

    def close_stdin(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()

    def read(self, timeout: float) -> list[tuple[int, bytes]]:
        out = []
        try:
            out.append(self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait())
            while True:
                out.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        return out

    def is_open(self) -> bool:
        return self._proc.poll() is None or any(r.is_alive() for r in self._readers) or not self._queue.empty()

    def exit_code(self) -> int | None:
        return self._proc.poll()

    def close(self) -> None:
        self.close_stdin()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait(timeout=30)
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()


class PodmanPodApi(PodApi):
    def __init__(self, work_dir: Path, namespace: str = "podman") -> None:
        self.namespace = namespace
        self._dir = work_dir
        self._env = podman_env(work_dir)
        self.manifests: dict[str, dict[str, Any]] = {}  # name -> the Pod as the backend created it
        self.policies: dict[str, dict[str, Any]] = {}
        self._plays: dict[str, subprocess.Popen[bytes]] = {}
        self._volumes: dict[str, list[str]] = {}

    def _podman(self, *args: str, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *args], capture_output=True, text=True, env=self._env, check=check,
                              timeout=timeout)

    def create_pod(self, manifest: Mapping[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        self.manifests[name] = copy.deepcopy(dict(manifest))
        self._volumes[name] = [f"{name}-{v['name']}" for v in manifest["spec"].get("volumes", [])]
        played = _as_played(manifest)
        path = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".yaml", dir=self._dir)[1])
        path.write_text(yaml.safe_dump(played))
        # `kube play` returns once the init containers are done: it runs beside the backend.
        self._plays[name] = subprocess.Popen(["podman", "kube", "play", str(path)], env=self._env,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _containers(self, name: str) -> dict[str, ContainerState]:
        listed = self._podman("ps", "-a", "--filter", f"pod={name}", "--format", "json")
        states = {}
        for c in json.loads(listed.stdout or "[]"):
            container = c["Names"][0].removeprefix(f"{name}-")
            state = c.get("State", "")
            if state == "running":
                states[container] = ContainerState("running")
            elif state in ("exited", "stopped"):
                states[container] = ContainerState("terminated", "Completed", "", c.get("ExitCode"))
            else:
                states[container] = ContainerState("waiting", state)
        return states

    def pod_state(self, name: str) -> PodState | None:
        if name not in self.manifests:
            return None
        play = self._plays.get(name)
        exists = self._podman("pod", "exists", name).returncode == 0
        if not exists:
            if play is not None and play.poll() is None:
                return PodState("Pending")
            return None
        containers = self._containers(name)
        probe_like = [c for n, c in containers.items() if n not in ("control", "infra")]
        phase = "Pending"
        if any(c.state == "running" for c in probe_like):
            phase = "Running"
        elif probe_like and all(c.state == "terminated" for c in probe_like):
            phase = "Succeeded" if all(c.exit_code == 0 for c in probe_like) else "Failed"
        return PodState(phase, containers)

    def exec(self, pod: str, container: str, argv: list[str], *, stdin: bool) -> ExecChannel:
        flags = ["-i"] if stdin else []
        return _PodmanExec(["podman", "exec", *flags, f"{pod}-{container}", *argv], self._env, stdin)

    def delete_pod(self, name: str) -> bool:
        known = self.manifests.pop(name, None) is not None
        removed = self._podman("pod", "rm", "-f", "-t", "0", name).returncode == 0
        for volume in (self._volumes.pop(name, None) or []):
            self._podman("volume", "rm", "-f", volume)
        play = self._plays.pop(name, None)
        if play is not None:
            if play.poll() is None:
                time.sleep(0.5)
                self._podman("pod", "rm", "-f", "-t", "0", name)
                play.kill()
            play.wait(timeout=30)
        return known or removed

    def pod_log(self, name: str, container: str) -> str:
        return self._podman("logs", f"{name}-{container}").stdout

    def create_network_policy(self, manifest: Mapping[str, Any]) -> None:
        self.policies[manifest["metadata"]["name"]] = copy.deepcopy(dict(manifest))

    def delete_network_policy(self, name: str) -> bool:
        return self.policies.pop(name, None) is not None

    def list_managed(self, label_selector: str) -> list[KubeObject]:
        wanted = dict(pair.split("=", 1) for pair in label_selector.split(","))
        found = []
        for kind, objects in (("pod", self.manifests), ("networkpolicy", self.policies)):
            for name, obj in objects.items():
                meta = obj["metadata"]
                if all(meta["labels"].get(k) == v for k, v in wanted.items()):
                    found.append(KubeObject(kind, name, meta["labels"], meta["annotations"]))
        return found

    def self_pod(self) -> SelfPod | None:
        return None

    def running_pods(self, label: str) -> list[str]:
        """Pods podman itself still has with this label (what a leak would leave)."""
        listed = self._podman("pod", "ps", "--filter", f"label={label}", "--format", "{{.Name}}")
        return [line for line in listed.stdout.splitlines() if line]


def _as_played(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest podman is given: host network (no Service network here), and volume names made
    unique, because podman 4.3 makes each emptyDir a named volume that outlives the Pod and is shared
    by every Pod naming it alike (in Kubernetes a volume's name is local to its Pod)."""
    played = copy.deepcopy(dict(manifest))
    spec = played["spec"]
    spec["hostNetwork"] = True
    name = played["metadata"]["name"]
    for volume in spec.get("volumes", []):
        volume["name"] = f"{name}-{volume['name']}"
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        for mount in container.get("volumeMounts", []):
            mount["name"] = f"{name}-{mount['name']}"
    return played
