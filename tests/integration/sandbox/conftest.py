"""Sandboxes of the real Docker backend, each test in a run of its own, checked for leaks."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.sandbox.base import BindMount, Hardening, Limits, SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.docker_sandbox import DockerSandbox
from tests.accepting_socket import accepting_unix_socket
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
def make_sandbox(backend: DockerBackend, sandbox_image: str, run_id: str) -> Iterator[MakeSandbox]:
    made: list[DockerSandbox] = []

    def make(case_id: str = "case", *, limits: Limits = Limits(), hardening: Hardening = Hardening()) -> DockerSandbox:
        spec = SandboxSpec(
            image=sandbox_image,
            run_id=run_id,
            case_id=case_id,
            deadline_epoch=time.time() + 900,
            limits=limits,
            hardening=hardening,
        )
        made.append(backend.create(spec))
        return made[-1]

    yield make
    for sandbox in made:  # as the runner does: its container, volumes and host directory go
        sandbox.destroy()


@pytest.fixture
def launcher_channel() -> Iterator[Path]:
    """A case's channel directory for the launcher: a gateway socket that takes connections, and a prompt."""
    path = Path(tempfile.mkdtemp(prefix="aes-sb-", dir="/tmp"))
    os.chmod(path, 0o755)
    (path / paths.PROMPT_FILE_NAME).write_text("the-prompt\n")
    os.chmod(path / paths.PROMPT_FILE_NAME, 0o644)
    try:
        with accepting_unix_socket(path / paths.GATEWAY_SOCKET_NAME, mode=0o777):
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_on_standby(backend: DockerBackend, sandbox_image: str, run_id: str, launcher_channel: Path):
    """Sandboxes whose launcher waits on standby (by default), the channel mounted where the launcher looks."""

    made: list[DockerSandbox] = []

    def make_one(case_id: str, standby: tuple[str, ...] = ac.launcher_command(),
                 mounts: tuple[BindMount, ...] = ()) -> DockerSandbox:
        spec = SandboxSpec(image=sandbox_image, run_id=run_id, case_id=case_id, deadline_epoch=time.time() + 600,
                           mounts=(BindMount(launcher_channel, paths.RUN_DIR), *mounts), standby=standby)
        made.append(backend.create(spec))
        return made[-1]

    yield make_one
    for sandbox in made:
        sandbox.destroy()
