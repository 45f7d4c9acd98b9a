"""A live cluster from KUBECONFIG (opt-in: see README.md); every test fails, never skips, without one."""

from __future__ import annotations

import os

import pytest


def _need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set (tests/cluster/README.md)")
    return value


@pytest.fixture(scope="session")
def cluster_settings() -> dict[str, str]:
    return {"image": _need("AGENT_EVAL_K8S_IMAGE"), "namespace": _need("AGENT_EVAL_K8S_NAMESPACE"),
            "controller_host": _need("AGENT_EVAL_CONTROLLER_HOST")}
