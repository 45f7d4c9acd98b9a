"""Where this controller runs relative to the Docker daemon, found once per run (the side effects of host_paths).

Three cases: on the daemon's host (the daemon sees our paths as they are); in
a container of that daemon (`-v /var/run/docker.sock:...`: only the
directories shared with the host exist for it, found from our own
container's mounts); or with DOCKER_HOST naming another machine (refused: the
sandboxes reach us through unix sockets).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
from docker.types import Mount

from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.docker_errors import docker_errors
from agent_eval_sandbox.sandbox.held_dirs import HeldDir
from agent_eval_sandbox.sandbox.host_paths import MountMap, mounts_of, own_container_id

# Files container engines leave in every container's root.
_CONTAINER_MARKERS = (Path("/.dockerenv"), Path("/run/.containerenv"))
PROBE_TARGET = "/aes-probe"
_TOKEN_FILE = "token"


@dataclass(frozen=True)
class OwnContainer:
    """The container this controller runs in, as the daemon it talks to knows it."""

    id: str
    mounts: tuple[MountMap, ...]


def own_container(api: docker.APIClient, mountinfo: Path = Path("/proc/self/mountinfo")) -> OwnContainer | None:
    """Our container if the daemon runs it; None on its host, or in a container of another engine."""
    try:
        container_id = own_container_id(mountinfo.read_text())
    except OSError:
        return None
    if container_id is None:
        return None
    with docker_errors("inspecting the controller's own container"):
        try:
            info = api.inspect_container(container_id)
        except docker.errors.NotFound:
            return None  # e.g. a job container of another daemon, with this one's socket mounted
    return OwnContainer(container_id, mounts_of(info))


def in_a_container(own: OwnContainer | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process runs in a container at all (of this daemon or not: a pod has no /.dockerenv)."""
    return (own is not None or any(marker.exists() for marker in _CONTAINER_MARKERS)
            or "KUBERNETES_SERVICE_HOST" in environ)


def probe_visible(api: docker.APIClient, image: str, root: Path, daemon_root: Path, owner: L.Owner,
                  container: str | None) -> str | None:
    """None when the daemon's `daemon_root` is our `root`; else why not.

    A marker of random content is written under `root` (in a held directory, see
    held_dirs.py), and read back through a container (created, never started)
    that bind-mounts `daemon_root`.
    """
    root.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    # A held directory, so that a controller killed during the probe leaves nothing the next sweep keeps.
    with HeldDir(root, "aes-probe-") as marker:
        (marker.path / _TOKEN_FILE).write_text(token)
        return _read_through_daemon(api, image, f"{marker.path.name}/{_TOKEN_FILE}", token, daemon_root, owner,
                                    container)


def _read_through_daemon(api: docker.APIClient, image: str, name: str, token: str, daemon_root: Path,
                         owner: L.Owner, container: str | None) -> str | None:
    container_id: str | None = None
    try:
        with docker_errors("checking which directories the Docker daemon sees"):
            try:
                container_id = api.create_container(
                    image, command=["true"], network_disabled=True,
                    name=L.object_name("probe", token[:8]),
                    labels=L.object_labels(run_id="probe", case_id="probe", owner=owner,
                                           deadline_epoch=time.time() + 60, container=container),
                    host_config=api.create_host_config(
                        network_mode="none",
                        mounts=[Mount(PROBE_TARGET, str(daemon_root), type="bind", read_only=True)]),
                )["Id"]
            except docker.errors.APIError as exc:
                if exc.status_code in (400, 500) and "does not exist" in str(exc.explanation or exc):
                    return f"{daemon_root} does not exist on the daemon's machine"
                raise
            try:
                stream, _ = api.get_archive(container_id, f"{PROBE_TARGET}/{name}")
            except docker.errors.NotFound:
                return f"the daemon's {daemon_root} is another directory"
            seen = _single_file(b"".join(stream))
        return None if seen == token.encode() else f"the daemon's {daemon_root} is another directory"
    finally:
        if container_id is not None:
            with contextlib.suppress(docker.errors.DockerException):
                api.remove_container(container_id, force=True)


def _single_file(archive: bytes) -> bytes | None:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                return handle.read(4096) if handle is not None else None
    return None
