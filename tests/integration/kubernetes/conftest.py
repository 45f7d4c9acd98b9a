"""The sandbox image in podman, and a Kubernetes backend whose Pods podman runs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.config.models import SandboxConfig
from agent_eval_sandbox.sandbox.kubernetes_backend import KubernetesBackend
from agent_eval_sandbox.sandbox.relay import Relay
from tests.integration.kubernetes.podman_api import PodmanPodApi, podman_env


@pytest.fixture(scope="session")
def podman_image(sandbox_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sandbox image as podman has it (`docker save | podman load` once per image)."""
    env = podman_env(tmp_path_factory.mktemp("podman-conf"))
    ref = f"localhost/{sandbox_image}"
    if subprocess.run(["podman", "image", "exists", ref], env=env).returncode != 0:
        save = subprocess.Popen(["docker", "save", sandbox_image], stdout=subprocess.PIPE)
        subprocess.run(["podman", "load"], stdin=save.stdout, env=env, check=True, capture_output=True)
        assert save.wait() == 0
    return ref


@pytest.fixture
def podman_api(tmp_path: Path) -> PodmanPodApi:
    work = tmp_path / "podman"
    work.mkdir()
    return PodmanPodApi(work)


@pytest.fixture
def kube_backend(podman_api: PodmanPodApi, podman_image: str) -> Iterator[KubernetesBackend]:
    """The real backend on podman; the relay listens on loopback, where the Pods (host network) reach it."""
    config = SandboxConfig.model_validate({"backend": "kubernetes", "image": podman_image,
                                           "controller": {"host": "127.0.0.1", "listen": "127.0.0.1"}})
    backend = KubernetesBackend(config, api=podman_api, relay=Relay("127.0.0.1", 0), start_timeout_s=120)
    try:
        yield backend
    finally:
        backend.gc(all=True)
        backend.close()
