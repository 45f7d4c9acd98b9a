"""Sandboxes of the real Docker backend, each test in a run of its own, checked for leaks."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from agent_eval_sandbox.sandbox.base import Hardening, Limits, SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.docker_sandbox import DockerSandbox
from tests.docker_objects import objects_of_run


@pytest.fixture(scope="session")
def backend() -> DockerBackend:
    return DockerBackend()


@pytest.fixture
def run_id(backend: DockerBackend) -> Iterator[str]:
    rid = f"test-{uuid.uuid4().hex[:12]}"
    yield rid
    backend.destroy_run(rid)
    assert objects_of_run(rid) == []


MakeSandbox = Callable[..., DockerSandbox]


@pytest.fixture
def make_sandbox(backend: DockerBackend, sandbox_image: str, run_id: str) -> MakeSandbox:
    def make(case_id: str = "case", *, limits: Limits = Limits(), hardening: Hardening = Hardening()) -> DockerSandbox:
        spec = SandboxSpec(
            image=sandbox_image,
            run_id=run_id,
            case_id=case_id,
            deadline_epoch=time.time() + 900,
            limits=limits,
            hardening=hardening,
        )
        return backend.create(spec)

    return make
