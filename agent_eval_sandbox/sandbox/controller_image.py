"""`image build --controller`: the top-level Dockerfile built from a source checkout, with no registry.

The build context is the checkout's package and build files (the same ones
`.dockerignore` lets through) plus a `wheelhouse/` of every Python
dependency, downloaded here by this interpreter's pip — with the host's pip
settings (index, proxy, certificates) — for the image's Python and
architecture. The Dockerfile then installs from the wheelhouse only, so the
build needs neither PyPI nor a container registry: just a base image (the
bootstrapped one by default, as for the sandbox image).
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
from rich.console import Console

from agent_eval_sandbox import __version__
from agent_eval_sandbox.errors import ImageError
from agent_eval_sandbox.sandbox.docker_errors import connect, docker_errors
from agent_eval_sandbox.sandbox.image import PACKAGE_DIR, resolve_base
from agent_eval_sandbox.sandbox.progress import Progress

CONTROLLER_REPOSITORY = "agent-eval-sandbox-controller"
# What the build context holds besides the wheelhouse (mirrored by .dockerignore).
CONTEXT_ENTRIES = ("Dockerfile", "pyproject.toml", "README.md", "agent_eval_sandbox")
# The Python of Debian bookworm, which BASE_IMAGE must be based on (python:3.11-slim is too).
IMAGE_PYTHON = "3.11"
# Wheel platforms a bookworm (glibc 2.36) image runs, newest first.
_MANYLINUX = ("manylinux_2_28", "manylinux_2_17", "manylinux2014")
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


@dataclass(frozen=True)
class ControllerImage:
    ref: str
    base: str


def default_ref() -> str:
    return f"{CONTROLLER_REPOSITORY}:{__version__}"


def checkout_root(package_dir: Path = PACKAGE_DIR, cwd: Path | None = None) -> Path:
    """The source checkout to build: the one this package runs from (an editable install), else the
    current directory; an ImageError when neither is one."""
    candidates = [package_dir.parent, (cwd or Path.cwd()).absolute()]
    for root in candidates:
        if all((root / name).exists() for name in CONTEXT_ENTRIES):
            return root
    raise ImageError(
        "`image build --controller` builds the top-level Dockerfile of a source checkout of agent-eval-sandbox, "
        f"and neither {candidates[0]} nor the current directory is one",
        fix="run it in a clone, or `docker build -t agent-eval-sandbox-controller .` there",
    )


def requirements(pyproject: Path) -> list[str]:
    """The project's dependencies and build requirements, from pyproject.toml."""
    data = tomllib.loads(pyproject.read_text())
    return [*data["project"]["dependencies"], *data["build-system"]["requires"]]


def pip_download_argv(reqs: list[str], dest: Path, arch: str) -> list[str]:
    """pip arguments to fetch binary wheels of `reqs` for the image's Python and `arch`."""
    machine = _ARCH.get(arch)
    if machine is None:
        raise ImageError(f"no wheels are known for the daemon's architecture {arch!r}",
                         fix="build with `docker build` on a machine of that architecture")
    platforms = [arg for tag in _MANYLINUX for arg in ("--platform", f"{tag}_{machine}")]
    return [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
            "--dest", str(dest), "--only-binary=:all:", "--python-version", IMAGE_PYTHON,
            "--implementation", "cp", "--abi", f"cp{IMAGE_PYTHON.replace('.', '')}", *platforms, *reqs]


def context_paths(root: Path) -> Iterator[tuple[str, Path]]:
    """(name in the context, file) for the checkout's part of the context."""
    for entry in CONTEXT_ENTRIES:
        path = root / entry
        if path.is_file():
            yield entry, path
            continue
        for file in sorted(path.rglob("*")):
            rel = file.relative_to(root)
            if file.is_file() and "__pycache__" not in rel.parts and file.suffix != ".pyc":
                yield rel.as_posix(), file


def build_controller_image(*, base_image: str | None = None, tag: str | None = None, no_cache: bool = False,
                           client: docker.DockerClient | None = None,
                           console: Console | None = None) -> ControllerImage:
    """Build the controller image (always: it is a release artifact, not a per-run cache; the builder's
    layer cache makes an unchanged one quick unless `no_cache`)."""
    root = checkout_root()
    client = client or connect()
    base_ref, _ = resolve_base(client, base_image, console=console)
    with docker_errors("asking the daemon for its architecture"):
        arch = client.api.info().get("Architecture") or "x86_64"
    ref = tag or default_ref()
    with tempfile.TemporaryDirectory(prefix="aes-controller-") as work:
        wheelhouse = Path(work) / "wheelhouse"
        with Progress(console, "downloading the Python dependencies (this host's pip settings)") as progress:
            _run(pip_download_argv(requirements(root / "pyproject.toml"), wheelhouse, arch), progress)
        context = Path(work) / "context.tar"
        with tarfile.open(context, "w") as tar:
            for name, path in context_paths(root):
                tar.add(path, arcname=name, recursive=False)
            for wheel in sorted(wheelhouse.iterdir()):
                tar.add(wheel, arcname=f"wheelhouse/{wheel.name}", recursive=False)
        with context.open("rb") as fileobj:
            _build(client, fileobj, ref, base_ref, console, no_cache=no_cache)
    return ControllerImage(ref=ref, base=base_ref)


def _run(argv: list[str], progress: Progress) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace")
    for line in proc.stdout.splitlines():
        progress.update(line)
    if proc.returncode != 0:
        tail = " | ".join(line for line in proc.stderr.splitlines() if line.startswith("ERROR"))[-600:]
        raise ImageError(f"pip could not download the controller's dependencies: {tail or proc.stderr[-600:]}",
                         fix="check this host's pip settings (index, proxy), or `docker build` where PyPI is "
                         "reachable from build containers")


def _build(client: docker.DockerClient, fileobj: object, ref: str, base_ref: str, console: Console | None, *,
           no_cache: bool) -> None:
    tail: deque[str] = deque(maxlen=3)
    with Progress(console, f"building {ref} from {base_ref}") as progress, docker_errors(f"building {ref}"):
        for chunk in client.api.build(fileobj=fileobj, custom_context=True, dockerfile="Dockerfile", tag=ref,
                                      buildargs={"BASE_IMAGE": base_ref}, rm=True, forcerm=True, pull=False,
                                      nocache=no_cache, decode=True):
            if "error" in chunk:
                raise ImageError(f"building {ref} failed: {chunk['error'].strip()} (last output: {' | '.join(tail)})",
                                 fix="a failure installing Debian packages means no Debian mirror is reachable "
                                 "from build containers: use a base that has python3 and git")
            for line in chunk.get("stream", "").splitlines():
                if line.strip():
                    tail.append(line.strip())
                    (progress.note if line.startswith("Step ") else progress.update)(line)
