"""Where the files a sandbox mounts live, and the paths the container daemon knows them by (pure).

Every bind mount of a sandbox — the per-case directory with the gateway and
broker sockets and the prompt, the managed settings, the staged project
resources, its /etc/hosts — is in a directory the controller makes. The daemon
resolves a bind mount's source on *its* filesystem. When the controller runs
on the daemon's host the two agree; when it runs in a container with the
host's socket mounted, only the directories it shares with the host (a bind
mount or a volume) exist for the daemon, possibly under another path.

`HostPaths` is that seam: the directory under which the controller makes every
sandbox-visible file (`root`), and how a path under it is spelled for the daemon
(`for_daemon`, through the controller's own mounts when it runs in a container).

The controller binds unix sockets under `root`, and a socket's path may not
exceed 107 bytes; a runs directory in a CI checkout easily takes half of that.
A long `root` is therefore reached through a short symlink in the temp
directory (`alias`): the controller's paths go through it, the daemon is given
the real ones. Everything here is pure except `HostPaths.at` and `temp_dir`.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.sandbox.held_dirs import HeldDir, HeldSymlink


class SharedDirError(UserError):
    """The daemon cannot see the directory the sandboxes' files would live in."""


class RemoteDaemonError(UserError):
    """DOCKER_HOST names another machine: the sandboxes' unix sockets cannot reach it."""


@dataclass(frozen=True)
class MountMap:
    """One mount of the controller's own container: `inside` (its path there) is `daemon` for the daemon."""

    inside: PurePosixPath
    daemon: PurePosixPath


@dataclass(frozen=True)
class HostPaths:
    """Where the controller makes the files its sandboxes mount, and how the daemon names them."""

    root: Path
    # Empty when the daemon sees the controller's paths as they are (the controller runs on its host).
    mounts: tuple[MountMap, ...] = ()
    # The controller runs in a container: whether the daemon sees `root` is checked, not assumed.
    in_container: bool = False
    # A short symlink to `root`, when `root` is too long to hold socket paths (see the module's doc).
    alias: Path | None = None

    @classmethod
    def at(cls, root: Path, mounts: tuple[MountMap, ...] = (), *, in_container: bool = False,
           tmp: Path | None = None) -> HostPaths:
        """`root` (made if missing), with a short alias in `tmp` when it is too long; the alias goes at exit."""
        root.mkdir(parents=True, exist_ok=True)
        alias = short_alias(root, tmp or Path(tempfile.gettempdir()))
        return cls(root, mounts, in_container, alias)

    @property
    def base(self) -> Path:
        """Where the controller makes its sandbox-visible directories (and binds sockets in them)."""
        return self.alias or self.root

    def for_daemon(self, path: Path) -> Path:
        """`path` as the daemon knows it: through the alias to `root`, then through the controller's mounts."""
        if self.alias is not None and path.is_relative_to(self.alias):
            path = self.root / path.relative_to(self.alias)
        if not self.mounts:
            return path
        found = daemon_path(PurePosixPath(path), self.mounts)
        return Path(found) if found is not None else path

    def temp_dir(self, prefix: str) -> HeldDir:
        """A fresh private directory under `base`, held until the caller releases it (see held_dirs)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return HeldDir(self.base, prefix)


# The longest path the controller makes under a root: <prefix+8>/<slot>/run/<socket>, with room for long
# slot names. A root longer than this leaves too little of the 107 bytes.
ALIAS_ABOVE_BYTES = 56


def short_alias(root: Path, tmp: Path) -> Path | None:
    """A symlink `tmp/aes-r-<random>` to `root` if `root` is long, removed when this process exits
    (held like the directories: after a SIGKILL, `gc` removes it)."""
    if len(os.fsencode(root)) <= ALIAS_ABOVE_BYTES:
        return None
    alias = HeldSymlink(tmp, "aes-r-", root)
    atexit.register(alias.release)
    return alias.path


def daemon_path(path: PurePosixPath, mounts: Iterable[MountMap]) -> PurePosixPath | None:
    """`path` through the deepest mount that holds it, or None when none does."""
    best: MountMap | None = None
    for mount in mounts:
        if (path == mount.inside or mount.inside in path.parents) and (
                best is None or len(mount.inside.parts) > len(best.inside.parts)):
            best = mount
    if best is None:
        return None
    return best.daemon / path.relative_to(best.inside)


# The daemon bind-mounts a container's hostname, hosts and resolv.conf from its own directory for that
# container (Docker: <data-root>/containers/<id>/, Podman: .../overlay-containers/<id>/userdata/).
_CONTAINER_DIR = re.compile(r"containers/([0-9a-f]{64})/")
_OWN_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf")


def own_container_id(mountinfo: str) -> str | None:
    """The id of the container this process runs in, from /proc/self/mountinfo; None outside one."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[4] in _OWN_FILES:
            match = _CONTAINER_DIR.search(fields[3])
            if match:
                return match.group(1)
    return None


def mounts_of(inspect: Mapping[str, Any]) -> tuple[MountMap, ...]:
    """The writable bind and volume mounts of a container (from the daemon's inspect answer)."""
    found = []
    for mount in inspect.get("Mounts") or []:
        if mount.get("Type") not in ("bind", "volume") or not mount.get("RW", False):
            continue
        source, destination = mount.get("Source"), mount.get("Destination")
        if source and destination:
            found.append(MountMap(PurePosixPath(destination), PurePosixPath(source)))
    return tuple(found)


_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_LOCAL_SCHEMES = {"unix", "npipe", "fd", ""}


def remote_daemon(docker_host: str | None) -> str | None:
    """The remote machine DOCKER_HOST names, or None when the daemon runs on this one (pure: no lookup)."""
    if not docker_host:
        return None
    parts = urlsplit(docker_host if "://" in docker_host else f"tcp://{docker_host}")
    if parts.scheme in _LOCAL_SCHEMES:
        return None
    host = (parts.hostname or "").lower()
    if host in _LOCAL_NAMES:
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return host or docker_host


def remote_daemon_error(docker_host: str, host: str) -> RemoteDaemonError:
    return RemoteDaemonError(
        f"DOCKER_HOST={docker_host} is a daemon on another machine ({host}): a sandbox reaches the model "
        "gateway and the hook broker through unix sockets of this process, which cannot cross "
        "machines",
        fix="run agent-eval-sandbox on the Docker host itself, or in a container there with "
        "`-v /var/run/docker.sock:/var/run/docker.sock` (see README, \"Run it from a container\")",
    )


def shared_root(explicit: Path | None, runs_base: Path, *, in_container: bool, tmp: Path) -> Path:
    """The directory the sandboxes' files go under: the one given, else the temp dir on the daemon's host,
    else (in a container) the runs directory — the one directory a CI job shares with the host anyway."""
    if explicit is not None:
        return explicit.absolute()
    return runs_base.absolute() if in_container else tmp


def missing_mount_error(root: Path, *, why: str) -> SharedDirError:
    """One line: which directory the daemon cannot see, and the `-v` that fixes it."""
    return SharedDirError(
        f"this controller runs in a container and the Docker daemon cannot see {root}, where the sandboxes' "
        f"sockets and staged files go (the runs directory, or --shared-dir): {why}",
        fix=f"mount it (or a directory above it, e.g. the project: `-v \"$PWD:$PWD\" -w \"$PWD\"`) from the host "
        f"at the same path (`docker run -v {root}:{root} ...`), or pass --shared-dir (AGENT_EVAL_SHARED_DIR) "
        "naming a directory mounted so",
    )


def candidates_note(paths: Sequence[MountMap]) -> str:
    """The controller's shareable mounts, for the error message."""
    shown = ", ".join(str(m.inside) for m in paths[:4]) + (", …" if len(paths) > 4 else "")
    return f"this container's writable mounts are {shown}" if paths else "this container has no writable mounts"
