"""The `Sandbox` interface: what the runner needs from one case's isolated environment.

A backend (docker, kubernetes) implements `SandboxBackend` and
`Sandbox`; nothing outside `sandbox/` knows which one runs. A command that
fails is a value (`ExecResult`); only a sandbox that itself broke (vanished,
daemon error mid-command) raises `SandboxError`.
"""

from __future__ import annotations

import enum
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, ClassVar, Literal

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.sandbox import defaults
from agent_eval_sandbox.sandbox.archive import CopyInReport, CopyOutReport
from agent_eval_sandbox.sandbox.defaults import parse_size
from agent_eval_sandbox.sandbox.host_paths import HostPaths, shared_root

MiB = 1024 * 1024
GiB = 1024 * MiB

OnTimeout = Literal["freeze", "kill_exec"]


class SandboxError(Exception):
    """The sandbox itself failed (not the command in it); the case is an error, not a failure."""


class SandboxInfraError(SandboxError):
    """The sandbox machinery failed before the command could start (creating the sandbox, copying
    the workspace in, starting the exec): nothing the command did caused it. A case that ends on
    one is an `infra_error`, not the skill's failure."""


@dataclass(frozen=True)
class Limits:
    """Resource caps of one sandbox. tmpfs sizes count against `memory_bytes` once filled."""

    cpus: float = defaults.CPUS
    memory_bytes: int = parse_size(defaults.MEMORY)
    pids: int = defaults.PIDS
    workspace_bytes: int = parse_size(defaults.DISK)
    tmp_bytes: int = parse_size(defaults.TMP_SIZE)
    home_bytes: int = parse_size(defaults.HOME_SIZE)

    def __post_init__(self) -> None:
        for name in ("cpus", "memory_bytes", "pids", "workspace_bytes", "tmp_bytes", "home_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive")


@dataclass(frozen=True)
class Hardening:
    """Confinement switches; the defaults are the hardened ones."""

    user: str = defaults.USER  # numeric uid[:gid]; the sandbox filesystems are owned by it
    read_only_root: bool = defaults.READ_ONLY_ROOT
    cap_drop: tuple[str, ...] = defaults.CAP_DROP
    cap_add: tuple[str, ...] = defaults.CAP_ADD
    no_new_privileges: bool = defaults.NO_NEW_PRIVILEGES
    init: bool = defaults.INIT
    network: str = defaults.NETWORK
    runtime: str | None = None  # e.g. a gVisor runtime registered with the daemon

    def __post_init__(self) -> None:
        uid, _, gid = self.user.partition(":")
        if not uid.isdigit() or (gid and not gid.isdigit()):
            raise ValueError(f"Hardening.user must be a numeric uid[:gid], got {self.user!r}")

    @property
    def uid(self) -> int:
        return int(self.user.partition(":")[0])

    @property
    def gid(self) -> int:
        _, _, gid = self.user.partition(":")
        return int(gid) if gid else self.uid


@dataclass(frozen=True)
class BindMount:
    """A host path shown inside the sandbox (e.g. the gateway's unix socket directory)."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class SandboxSpec:
    image: str
    run_id: str
    case_id: str
    # Epoch seconds after which the sandbox is certainly stale: any reaper, on
    # any host, may remove it once this (plus a grace) has passed.
    deadline_epoch: float
    limits: Limits = field(default_factory=Limits)
    hardening: Hardening = field(default_factory=Hardening)
    mounts: tuple[BindMount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workspace: str = paths.WORKSPACE  # the writable, size-capped workspace; default cwd
    home: str = paths.HOME  # writable, size-capped $HOME (holds ~/.claude transcripts)
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    # A launcher to start ahead on standby (`inside/standby.py`): the first exec of a command that
    # begins with it is handed to that process instead of starting a new one. A backend may ignore it.
    standby: tuple[str, ...] = ()


class EndReason(enum.Enum):
    EXITED = "exited"  # the command exited by itself; see exit_code
    SIGNALED = "signaled"  # killed by a signal (exit code 128+n); see signal
    TIMED_OUT = "timed_out"  # the deadline ended it
    OOM_KILLED = "oom_killed"  # the memory limit's OOM killer ended it


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None  # None when the deadline froze the sandbox before it exited
    end_reason: EndReason
    signal: int | None
    duration_s: float
    # OOM kills in the sandbox while the command ran, and whether the pids limit
    # refused a fork; None when they could not be read.
    oom_kills: int | None
    pids_limit_hit: bool | None
    stdout: bytes | None  # None when streamed to a file
    stderr: bytes | None
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.end_reason is EndReason.EXITED and self.exit_code == 0


@dataclass(frozen=True)
class RemovedObject:
    """A backend object removed by teardown, the reaper or gc (for the CLI to print)."""

    kind: str  # "container" | "volume" | ...
    name: str
    run_id: str | None
    case_id: str | None
    reason: str


class Sandbox(ABC):
    """One case's running, idle sandbox. Commands run in it with `exec`."""

    @property
    @abstractmethod
    def spec(self) -> SandboxSpec: ...

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def frozen(self) -> bool:
        """True once a deadline (or `freeze`) stopped it: copy_out works, exec raises."""

    @abstractmethod
    def exec(
        self,
        cmd: Sequence[str],
        *,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
        stdout: BinaryIO | None = None,
        stderr: BinaryIO | None = None,
        timeout: float | None = None,
        on_timeout: OnTimeout = "freeze",
        max_output_bytes: int = 64 * MiB,
    ) -> ExecResult:
        """Run `cmd` and wait for it (or for `timeout` seconds).

        stdout/stderr are written to the given files as they arrive (or kept in
        the result), each capped at `max_output_bytes`. At the timeout,
        "freeze" stops every process of the sandbox at once (files stay for
        `copy_out`; further `exec` raises) and "kill_exec" kills only this
        command's processes, leaving the sandbox usable (for lifecycle hooks).
        "kill_exec" finds them by an environment marker: a child that scrubs
        its environment survives until the sandbox is frozen or destroyed.
        """

    @abstractmethod
    def copy_in(self, src_dir: Path, dest: str, *, exclude: Callable[[str], bool] | None = None) -> CopyInReport:
        """Copy the contents of a host directory to `dest`, owned by the sandbox user.

        Host links are never followed. A symlink is copied as a link if its
        target is relative without `..`; other symlinks and special files are
        skipped and reported. `exclude(relative posix path)` leaves paths out
        (e.g. sandbox.filesystem.denyRead), a directory with everything in it.
        """

    @abstractmethod
    def copy_in_files(self, files: Mapping[str, bytes], dest: str, *, mode: int = 0o644) -> CopyInReport:
        """Write `{relative path: content}` under `dest`, owned by the sandbox user."""

    @abstractmethod
    def copy_out(self, src: str, dest_dir: Path, *, max_bytes: int, max_files: int,
                 stop: threading.Event | None = None) -> CopyOutReport:
        """Extract `src` (a directory's contents, or a file) into `dest_dir`, safely.

        Once `stop` is set, raises CopyOutInterrupted without reading the rest.

        Works while running or frozen, never after `destroy`. A missing `src` is
        a report with `found=False`; an archive over a cap raises UnsafeArchiveError.
        Nothing named `.git` is extracted (`agent_eval_sandbox.git_names`).
        """

    def expect_copy_out(self, paths: Sequence[str], *, max_bytes: int, max_files: int) -> None:
        """Say that `copy_out` of these paths, with these caps, follows the next `exec` at once.

        A backend may then take them as that command exits and answer those
        `copy_out`s from what it took, as long as nothing else ran or was copied
        in meanwhile. Only a hint: by default nothing changes.
        """
        return None

    @abstractmethod
    def freeze(self) -> None:
        """Stop every process now, keeping the files for `copy_out` (idempotent)."""

    @abstractmethod
    def thaw(self) -> bool:
        """Resume a frozen sandbox with every process killed but its idle main one.

        For cleanup commands after a deadline (container-scope after_each
        hooks). False when that could not be done (e.g. a fork bomb keeps the
        pids table full): the sandbox then stays frozen.
        """

    @abstractmethod
    def destroy(self) -> None:
        """Remove the sandbox and its storage (idempotent; files are gone afterwards)."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.destroy()


class SandboxBackend(ABC):
    """Creates sandboxes and owns the cleanup of everything it ever created."""

    name: ClassVar[str]
    # Whether a sandbox sees what is written into its `BindMount` sources after `create` (bind
    # mounts: yes; a backend that copies them in at creation: no). Only then may a sandbox be made
    # ahead of its case (`sandbox/pool.py`), before the case writes its prompt, settings and sockets.
    mounts_are_live: bool = False

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox:
        """A started, idle sandbox with empty workspace and home."""

    def prepare_run(self, run_id: str) -> None:
        """Make and check what the run's sandboxes share, before the first case (by default nothing)."""
        return None

    @abstractmethod
    def destroy_run(self, run_id: str) -> list[RemovedObject]:
        """Remove every object of `run_id`, whoever created it."""

    @abstractmethod
    def reap_orphans(self) -> list[RemovedObject]:
        """Remove objects whose owner process is gone or whose deadline is long past."""

    @abstractmethod
    def gc(self, *, all: bool = False) -> list[RemovedObject]:
        """`all=False`: reap orphans. `all=True`: remove every object this tool manages."""

    @abstractmethod
    def check_runtime(self, name: str) -> None:
        """Raise RuntimeNotRegisteredError unless the container runtime `name` is usable."""

    def host_paths(self, shared_dir: Path | None, runs_base: Path) -> HostPaths:
        """Where a run makes the files its sandboxes mount (`BindMount` sources are paths under its root).

        Called once per run, before the image. `shared_dir`: the one the user
        gave (--shared-dir), else the backend chooses (here: the temp directory).
        """
        return HostPaths.at(shared_root(shared_dir, runs_base, in_container=False, tmp=Path(tempfile.gettempdir())))

    def check_host_paths(self, host: HostPaths, image: str) -> None:
        """Raise SharedDirError unless sandboxes of `image` can mount what is under `host.root`."""
        return None  # a backend whose sandboxes share the controller's filesystem has nothing to check
