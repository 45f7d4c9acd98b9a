"""The controller image, built here with no registry, and helpers to run it against this machine's daemon."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION, cache_root
from agent_eval_sandbox.sandbox.controller_image import CONTROLLER_REPOSITORY, context_paths

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart"
SOCKET = "/var/run/docker.sock"


def docker(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout)


@pytest.fixture(scope="session")
def controller_image(sandbox_image: str) -> str:
    """`image build --controller`, tagged by a hash of its context: built once per change of the checkout.

    Prints the build time and the image's size (the figures for the closing note).
    """
    digest = hashlib.sha256()
    for name, path in context_paths(REPO):
        digest.update(name.encode() + b"\0" + path.read_bytes())
    ref = f"{CONTROLLER_REPOSITORY}:test-{digest.hexdigest()[:12]}"
    if docker("image", "inspect", ref, check=False).returncode != 0:
        started = time.monotonic()
        build = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "image", "build", "--controller",
                                "--tag", ref, "--quiet"], capture_output=True, text=True, timeout=1800,
                               env={**os.environ, "DOCKER_BUILDKIT": "0"})
        assert build.returncode == 0, build.stderr[-3000:]
        assert build.stdout.strip() == ref
        print(f"\ncontroller image {ref}: built in {time.monotonic() - started:.1f} s")
    size = int(docker("image", "inspect", "--format", "{{.Size}}", ref).stdout)
    print(f"\ncontroller image {ref}: {size / 1e6:.0f} MB")
    return ref


@pytest.fixture
def warm_cache(tmp_path: Path, sandbox_image: str) -> Path:
    """A tool cache as a CI job restores it: Claude Code's release record, no binary.

    The sandbox image exists, so nothing else is needed: the controller must not download anything
    (containers here reach no npm registry, which would make the run fail if it tried).
    """
    record = cache_root() / "claude" / DEFAULT_CLAUDE_VERSION / "x86_64" / "integrity"
    cache = tmp_path / "cache"
    target = cache / "agent-eval-sandbox" / "claude" / DEFAULT_CLAUDE_VERSION / "x86_64" / "integrity"
    target.parent.mkdir(parents=True)
    shutil.copyfile(record, target)
    return cache


def controller_user() -> tuple[str, list[str]]:
    """(--user, extra docker run args): the image's own non-root user with the socket's group when we can
    hand it the files (root here), else ours."""
    gid = str(os.stat(SOCKET).st_gid)
    if os.geteuid() == 0:
        return "10001:10001", ["--group-add", gid]
    return f"{os.getuid()}:{os.getgid()}", ["--group-add", gid]


def give_to(path: Path, user: str) -> None:
    if os.geteuid() == 0:
        uid, gid = (int(x) for x in user.split(":"))
        for item in [path, *path.rglob("*")]:
            os.lchown(item, uid, gid)


@dataclass
class ControllerRun:
    process: subprocess.CompletedProcess[str]

    @property
    def output(self) -> dict:
        return json.loads(self.process.stdout)


def run_args(image: str, project: Path, cache: Path, *, user: str, extra: list[str],
             detached_name: str | None = None) -> list[str]:
    """`docker run` of the controller as README documents it, the project mounted at the same path.
    `detached_name`: run it in the background under that name, kept after it exits (to read its exit code)."""
    how = ["-d", "--name", detached_name] if detached_name else ["--rm"]
    return ["docker", "run", *how, "--init", "--user", user, *extra,
            "-v", f"{SOCKET}:{SOCKET}", "-v", f"{project}:{project}", "-w", str(project),
            "-v", f"{cache}:/cache", image]


def leftovers(run_id: str) -> list[str]:
    """Containers and volumes of a run still known to the daemon."""
    label = f"label={L.RUN_ID}={run_id}"
    return (docker("ps", "-aq", "--filter", label).stdout.split()
            + docker("volume", "ls", "-q", "--filter", label).stdout.split())


def sandboxes_of(run_id: str) -> list[str]:
    return docker("ps", "-q", "--filter", f"label={L.RUN_ID}={run_id}").stdout.split()


@pytest.fixture
def quickstart_copy(tmp_path: Path) -> Iterator[Path]:
    project = tmp_path / "proj"
    shutil.copytree(QUICKSTART, project)
    yield project
