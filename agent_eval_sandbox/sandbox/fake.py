"""A test double of the `Sandbox` interface: in-process, no Docker, nothing confined.

For unit tests of what drives sandboxes (the case pipeline, the scheduler, a
whole run); never for anything that needs isolation. What it keeps of the
real thing, so that such tests mean something:

- a filesystem: each sandbox is a temp directory on the host, the container's
  paths mapped into it (`/workspace` to `<root>/workspace`, `$HOME` to
  `<root>/home/agent`, a bind mount to its source);
- files cross it as the Docker backend's do, as tar streams of
  `sandbox/archive.py`: in, an archive of `tar_from_dir`/`tar_from_files`
  unpacked as the daemon does (links made, nothing outside the destination);
  out, the sandbox's files archived and unpacked by `extract_tar`, so the
  safe extraction, its caps and its skips apply;
- `exec` is a *behaviour* the test gives the backend: a function of the
  command (`ExecCall`) that returns a `Reply` (output and exit code), a
  `Hang` (the command never ends: the deadline freezes the sandbox, or kills
  only the command with `on_timeout="kill_exec"`), or raises `SandboxError`
  (the sandbox broke under the command);
- the lifecycle: exec after `freeze` or `destroy` raises, `copy_out` works
  while frozen and never after `destroy`, `destroy` removes the files;
- the backend's own registry of live sandboxes, which `destroy_run`,
  `reap_orphans` and `gc` act on, so a test can assert nothing leaked.

It is not registered as a backend name: eval.yaml cannot choose it. Tests
construct it and hand it to what they drive (`execute_run(backend=...)`).
"""

from __future__ import annotations

import json
import posixpath
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, BinaryIO, NamedTuple

from agent_eval_sandbox.errors import RuntimeNotRegisteredError
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.archive import CopyInReport, CopyOutReport, extract_tar, tar_from_dir, tar_from_files
from agent_eval_sandbox.sandbox.base import (
    BindMount,
    ExecResult,
    MiB,
    OnTimeout,
    RemovedObject,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
)
from agent_eval_sandbox.sandbox.outcome import classify_end


class FakeHangLimitError(AssertionError):
    """A hanging command outlived the backend's `hang_limit_s`: in a test, a deadline nobody applied."""


# What a command killed at its deadline with on_timeout="kill_exec" exits with (SIGKILL).
KILLED_EXIT_CODE = 137


# ---- what a behaviour sees and returns ------------------------------------------------------


@dataclass(frozen=True)
class ExecCall:
    """One `exec` as the behaviour sees it. Paths are the sandbox's; `host_path` maps them."""

    cmd: tuple[str, ...]
    env: Mapping[str, str]  # the sandbox's environment under the exec's own, as Docker merges them
    cwd: str
    user: str
    stdin: bytes | None
    timeout: float | None
    sandbox: FakeSandbox

    @property
    def root(self) -> Path:
        """The sandbox's filesystem on the host."""
        return self.sandbox.root

    def host_path(self, path: str) -> Path:
        """Where a sandbox path (absolute, or relative to the exec's cwd) lives on the host."""
        return self.sandbox.host_path(posixpath.join(self.cwd, path))

    def write(self, path: str, content: str | bytes, *, mode: int = 0o644) -> Path:
        """Write a file in the sandbox (parents made), as a command run in it would."""
        target = self.host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        target.chmod(mode)
        return target

    def read(self, path: str) -> bytes:
        return self.host_path(path).read_bytes()

    def arg_after(self, flag: str) -> str | None:
        """The argument following `flag` in the command line, if any."""
        for index, arg in enumerate(self.cmd[:-1]):
            if arg == flag:
                return self.cmd[index + 1]
        return None


@dataclass(frozen=True)
class Reply:
    """The command ran and ended by itself. An exit code of 128+n is a death by signal n;
    137 with `oom_kills` is the OOM killer's (as `sandbox/outcome.py` classifies them)."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    oom_kills: int = 0
    pids_limit_hit: bool = False


@dataclass(frozen=True)
class Hang:
    """The command prints this, then never ends: only its deadline, a freeze or destroy stops it."""

    stdout: bytes = b""
    stderr: bytes = b""


Behaviour = Callable[[ExecCall], Reply | Hang]


def exit_ok(call: ExecCall) -> Reply:
    """The default behaviour: every command succeeds silently."""
    return Reply()


def stream_json(objects: Iterable[Mapping[str, Any]]) -> bytes:
    """What `claude -p --output-format stream-json` prints for these events: one compact JSON object a line."""
    return b"".join(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for obj in objects)


class Action(NamedTuple):
    """One thing done to a sandbox, in order, for tests to check the stages against."""

    kind: str  # "create" | "copy_in" | "exec" | "freeze" | "thaw" | "copy_out" | "destroy" | "vanish"
    detail: str  # the path or the command's first word
    frozen: bool  # whether the sandbox was frozen when it happened


# ---- the sandbox -----------------------------------------------------------------------------


class _Capped:
    """One output stream of an exec: to its file or kept, at most `cap` bytes."""

    def __init__(self, sink: BinaryIO | None, cap: int) -> None:
        self.sink, self.cap = sink, cap
        self.kept = bytearray()
        self.written = 0
        self.truncated = False

    def write(self, data: bytes) -> None:
        room = self.cap - self.written
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        self.written += len(data)
        if self.sink is None:
            self.kept += data
        elif data:
            self.sink.write(data)
            self.sink.flush()

    def value(self) -> bytes | None:
        return bytes(self.kept) if self.sink is None else None


class FakeSandbox(Sandbox):
    def __init__(self, backend: FakeBackend, spec: SandboxSpec, name: str, root: Path) -> None:
        self._backend = backend
        self._spec = spec
        self._name = name
        self.root = root
        self.actions: list[Action] = []
        self.expected_copy_outs: list[tuple[str, ...]] = []  # each `expect_copy_out`'s paths
        self._lock = threading.Lock()
        self._frozen = False
        self._destroyed = False
        self._vanished = False
        # Set whenever a hanging command must stop looking: freeze, destroy, vanish.
        self._stop = threading.Event()
        for path in (spec.workspace, spec.home):
            self.host_path(path).mkdir(parents=True, exist_ok=True)
        self._record("create", spec.case_id)

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    @property
    def name(self) -> str:
        return self._name

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def destroyed(self) -> bool:
        return self._destroyed

    def did(self, kind: str) -> list[Action]:
        """The actions of one kind, in order."""
        return [action for action in self.actions if action.kind == kind]

    def _record(self, kind: str, detail: str) -> None:
        self.actions.append(Action(kind, detail, self._frozen))

    def host_path(self, path: str) -> Path:
        """The host path of an absolute sandbox path: a bind mount's source, else under `root`.

        Lexical (`..` cannot climb above `/`); links inside the root are the caller's business.
        """
        if not path.startswith("/"):
            raise ValueError(f"{path!r} is not an absolute path in the sandbox")
        normal = "/" + posixpath.normpath(path).lstrip("/")
        mounted = self._mount_of(normal)
        if mounted is not None:
            return mounted[0].source / mounted[1]
        return self.root / normal.lstrip("/")

    def _mount_of(self, normal: str) -> tuple[BindMount, str] | None:
        """The bind mount a normalised path is in (the innermost), and the path under its target."""
        for mount in sorted(self._spec.mounts, key=lambda m: -len(m.target)):
            target = mount.target.rstrip("/")
            if normal == target or normal.startswith(target + "/"):
                return mount, normal[len(target) + 1:]
        return None

    def _writable(self, path: str) -> bool:
        mounted = self._mount_of("/" + posixpath.normpath(path).lstrip("/"))
        return mounted is None or not mounted[0].read_only

    def _require_usable(self, action: str, *, running: bool) -> None:
        if self._destroyed:
            raise SandboxError(f"cannot {action}: sandbox {self._name} was destroyed")
        if self._vanished:
            raise SandboxError(f"cannot {action}: sandbox {self._name} is gone (it vanished under the controller)")
        if running and self._frozen:
            raise SandboxError(f"cannot {action}: sandbox {self._name} is frozen (its deadline passed)")

    # ---- exec ---------------------------------------------------------------------

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
        self._require_usable("run a command", running=True)
        self._record("exec", cmd[0] if cmd else "")
        call = ExecCall(
            cmd=tuple(cmd),
            env={**self._spec.env, "HOME": self._spec.home, **(env or {})},
            cwd=cwd or self._spec.workspace,
            user=user or self._spec.hardening.user,
            stdin=stdin,
            timeout=timeout,
            sandbox=self,
        )
        out, err = _Capped(stdout, max_output_bytes), _Capped(stderr, max_output_bytes)
        started = time.monotonic()
        reply = self._backend.behaviour(call)  # SandboxError (or a test's bug) propagates, as from Docker
        out.write(reply.stdout)
        err.write(reply.stderr)
        deadline_hit = isinstance(reply, Hang)
        if isinstance(reply, Hang):
            exit_code, oom_kills, pids_hit = self._hang(timeout, on_timeout), 0, False
        else:
            exit_code, oom_kills, pids_hit = reply.exit_code, reply.oom_kills, reply.pids_limit_hit
        reason, sig = classify_end(exit_code=exit_code, deadline_hit=deadline_hit, oom_kills=oom_kills)
        return ExecResult(
            exit_code=exit_code,
            end_reason=reason,
            signal=sig,
            duration_s=time.monotonic() - started,
            oom_kills=oom_kills,
            pids_limit_hit=pids_hit,
            stdout=out.value(),
            stderr=err.value(),
            output_truncated=out.truncated or err.truncated,
        )

    def _hang(self, timeout: float | None, on_timeout: OnTimeout) -> int | None:
        """Wait for the deadline (or a freeze, or destroy); the exit code of the command it ended."""
        limit = self._backend.hang_limit_s
        if timeout is not None and timeout <= limit:
            self._stop.wait(timeout)
        elif not self._stop.wait(limit):
            raise FakeHangLimitError(f"a command in sandbox {self._name} hung for {limit:g}s (its deadline: "
                                     f"{'none' if timeout is None else f'{timeout:g}s'}) and nothing froze or "
                                     "removed the sandbox")
        if self._destroyed or self._vanished:
            raise SandboxError(f"sandbox {self._name} was destroyed while a command ran")
        if on_timeout == "kill_exec" and not self._frozen:
            return KILLED_EXIT_CODE  # only the command died; the sandbox goes on
        self.freeze()
        return None

    # ---- files --------------------------------------------------------------------

    def copy_in(self, src_dir: Path, dest: str, *, exclude: Callable[[str], bool] | None = None) -> CopyInReport:
        uid, gid = self._spec.hardening.uid, self._spec.hardening.gid
        return self._put(dest, lambda out: tar_from_dir(src_dir, out, uid=uid, gid=gid, exclude=exclude))

    def copy_in_files(self, files: Mapping[str, bytes], dest: str, *, mode: int = 0o644) -> CopyInReport:
        uid, gid = self._spec.hardening.uid, self._spec.hardening.gid
        return self._put(dest, lambda out: tar_from_files(files, out, uid=uid, gid=gid, mode=mode))

    def _put(self, dest: str, write_tar: Callable[[IO[bytes]], CopyInReport]) -> CopyInReport:
        self._require_usable("copy files in", running=True)
        if not self._writable(dest):
            raise SandboxError(f"cannot copy files into {dest} of sandbox {self._name}: a read-only mount")
        self._record("copy_in", dest)
        with tempfile.TemporaryFile() as buf:
            summary = write_tar(buf)
            if summary.bytes > self._spec.limits.workspace_bytes:
                raise SandboxError(f"copying files into {dest} of sandbox {self._name}: no space left on device")
            buf.seek(0)
            target = self.host_path(dest)
            target.mkdir(parents=True, exist_ok=True)
            # As the daemon unpacks the host's archive: links are made, nothing lands outside `dest`.
            with tarfile.open(fileobj=buf, mode="r|") as tar:
                tar.extractall(target, filter="data")
        return summary

    def expect_copy_out(self, paths: Sequence[str], *, max_bytes: int, max_files: int) -> None:
        self.expected_copy_outs.append(tuple(paths))

    def copy_out(self, src: str, dest_dir: Path, *, max_bytes: int, max_files: int,
                 stop: threading.Event | None = None) -> CopyOutReport:
        self._require_usable(f"copy {src} out", running=False)
        self._record("copy_out", src)
        source = self.host_path(src)
        if not source.exists() and not source.is_symlink():
            return CopyOutReport(found=False)
        uid, gid = self._spec.hardening.uid, self._spec.hardening.gid
        with tempfile.TemporaryFile() as buf:
            if source.is_dir() and not source.is_symlink():
                summary = tar_from_dir(source, buf, uid=uid, gid=gid)
            else:  # one entry: the parent's archive with everything else left out
                summary = tar_from_dir(source.parent, buf, uid=uid, gid=gid,
                                       exclude=lambda rel: rel != source.name)
            buf.seek(0)
            report = extract_tar(buf, dest_dir, strip_top=None,
                                 max_bytes=max_bytes, max_files=max_files, stop=stop)
        # Links the archive writer already left out are skipped entries too (Docker's
        # archive would carry them, and the extraction skip them).
        left_out = tuple(entry for entry in summary.skipped if entry.kind != "excluded")
        return CopyOutReport(found=True, files=report.files, dirs=report.dirs, bytes=report.bytes,
                          skipped=left_out + report.skipped)

    # ---- lifecycle ----------------------------------------------------------------

    def freeze(self) -> None:
        with self._lock:
            if self._destroyed or self._frozen:
                return
            self._frozen = True
            self._record("freeze", "")
            self._stop.set()

    def thaw(self) -> bool:
        with self._lock:
            if self._destroyed or self._vanished:
                return False
            if not self._frozen:
                return True
            if not self._backend.thaw_succeeds:
                return False
            self._frozen = False
            self._stop.clear()
            self._record("thaw", "")
            return True

    def vanish(self) -> None:
        """The sandbox disappears behind its controller's back (removed by hand, the daemon lost it):
        every later exec and copy raises `SandboxError`; `destroy` still succeeds."""
        with self._lock:
            self._vanished = True
            self._record("vanish", "")
            self._stop.set()
            shutil.rmtree(self.root, ignore_errors=True)

    def destroy(self) -> None:
        with self._lock:
            if self._destroyed:
                return
            self._record("destroy", "")
            self._destroyed = True
            self._stop.set()
            shutil.rmtree(self.root, ignore_errors=True)
        self._backend._forget(self)


# ---- the backend -----------------------------------------------------------------------------


class FakeBackend(SandboxBackend):
    """Fake sandboxes and the registry of the live ones. Use as a context manager, or `close()`."""

    name = "fake"
    mounts_are_live = True  # a bind mount's source is the path itself (set False to act like Kubernetes)

    def __init__(
        self,
        behaviour: Behaviour = exit_ok,
        *,
        runtimes: Iterable[str] = (),
        on_create: Callable[[SandboxSpec], None] | None = None,
        thaw_succeeds: bool = True,
        hang_limit_s: float = 30.0,
        grace_s: float = L.DEFAULT_GRACE_S,
        base_dir: Path | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.runtimes = frozenset(runtimes)
        # Called before a sandbox is made; what it raises is what `create` raises.
        self.on_create = on_create
        self.thaw_succeeds = thaw_succeeds
        # A test fails in this time, not at pytest's timeout, when nothing ends a hanging command.
        self.hang_limit_s = hang_limit_s
        self.grace_s = grace_s
        self._own_dir = base_dir is None
        self.base_dir = Path(tempfile.mkdtemp(prefix="aes-fake-")) if base_dir is None else base_dir
        self.created: list[FakeSandbox] = []  # every sandbox ever made, in order
        self.peak_live = 0  # the most sandboxes alive at once
        self.reaped: list[RemovedObject] = []  # what reap_orphans, destroy_run and gc removed
        self._live: dict[str, FakeSandbox] = {}
        self._lock = threading.Lock()

    @property
    def live(self) -> list[FakeSandbox]:
        with self._lock:
            return list(self._live.values())

    def create(self, spec: SandboxSpec) -> FakeSandbox:
        if self.on_create is not None:
            self.on_create(spec)
        name = L.object_name(spec.run_id, spec.case_id)
        root = self.base_dir / name
        root.mkdir(parents=True)
        sandbox = FakeSandbox(self, spec, name, root)
        with self._lock:
            self._live[name] = sandbox
            self.created.append(sandbox)
            self.peak_live = max(self.peak_live, len(self._live))
        return sandbox

    def _forget(self, sandbox: FakeSandbox) -> None:
        with self._lock:
            self._live.pop(sandbox.name, None)

    def _remove(self, chosen: Callable[[FakeSandbox], str | None]) -> list[RemovedObject]:
        removed = []
        for sandbox in self.live:
            reason = chosen(sandbox)
            if reason is None:
                continue
            sandbox.destroy()
            removed.append(RemovedObject("sandbox", sandbox.name, sandbox.spec.run_id, sandbox.spec.case_id, reason))
        self.reaped += removed
        return removed

    def destroy_run(self, run_id: str) -> list[RemovedObject]:
        return self._remove(lambda s: f"teardown of run {run_id}" if s.spec.run_id == run_id else None)

    def reap_orphans(self) -> list[RemovedObject]:
        # In-process, every owner is alive: only a deadline long past makes an orphan.
        now = time.time()
        return self._remove(lambda s: "deadline passed" if s.spec.deadline_epoch + self.grace_s < now else None)

    def gc(self, *, all: bool = False) -> list[RemovedObject]:
        return self._remove(lambda s: "gc --all") if all else self.reap_orphans()

    def check_runtime(self, name: str) -> None:
        if name not in self.runtimes:
            raise RuntimeNotRegisteredError(
                f"container runtime {name!r} is not registered with the fake backend",
                fix="pass it in FakeBackend(runtimes=...)",
            )

    def close(self) -> None:
        """Destroy what is left and remove the backend's directory."""
        self.gc(all=True)
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> FakeBackend:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

