"""One case's Pod: exec with deadlines, copy in and out by tar over exec, freeze, destroy.

Every command runs through the API server's exec in the `agent` container,
as the Pod's user (Kubernetes exec cannot choose another); the environment
and working directory of a command are set by `env -C DIR K=V… CMD`. Files
cross as tar streams over the same exec: in, `tar -x` of an archive made by
`sandbox/archive.py`; out, `tar -c` in the Pod and `extract_tar` on this side,
the same safe extraction as Docker's.

There is no pause in Kubernetes. At a deadline every process of the agent is
stopped with one `kill(-1, SIGSTOP)` (it reaches them all at once, fork bombs
included); the files stay for `copy_out`, and `thaw` kills them all.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, BinaryIO

from agent_eval_sandbox.errors import UnsafeArchiveError
from agent_eval_sandbox.sandbox import kubernetes_objects as ko
from agent_eval_sandbox.sandbox import process_scripts as ps
from agent_eval_sandbox.sandbox.archive import CopyInReport, CopyOutReport, extract_tar, tar_from_dir, tar_from_files
from agent_eval_sandbox.sandbox.base import ExecResult, MiB, OnTimeout, Sandbox, SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.kubernetes_api import STDERR, STDOUT, ExecChannel, PodApi
from agent_eval_sandbox.sandbox.outcome import PROBE_CMD, CgroupCounters, classify_end, parse_probe

_POLL_S = 0.2
_KILL_WAIT_S = 5.0
_HOUSEKEEPING_S = 60.0
COPY_TIMEOUT_S = 900.0
MAX_ERROR_BYTES = 64 * 1024
# Prints D (a directory: its contents follow as a tar), F (a file: it follows), or N (nothing
# there, or a link: never followed), then the archive.
COPY_OUT_SCRIPT = (
    'if [ -L "$1" ]; then echo N; exit 0; fi\n'
    'if [ -d "$1" ]; then echo D; cd "$1" && exec tar -c -f - .; fi\n'
    'if [ -e "$1" ]; then echo F; cd "$(dirname "$1")" && exec tar -c -f - -- "$(basename "$1")"; fi\n'
    "echo N\n"
)
COPY_IN_SCRIPT = 'mkdir -p -- "$1" && exec tar -x -p -f - -C "$1"'


def wrap_command(cmd: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> list[str]:
    """`cmd` with its working directory and environment, for an exec that takes neither."""
    if not env and not cwd:
        return list(cmd)
    for key in env or {}:
        if not key or "=" in key:
            raise SandboxError(f"environment variable name {key!r} cannot be passed to a Pod exec")
    prefix = ["env"] + (["-C", cwd] if cwd else []) + [f"{k}={v}" for k, v in (env or {}).items()]
    return [*prefix, "--", *cmd] if cmd and "=" in cmd[0] else [*prefix, *cmd]


class _Output:
    """The stdout/stderr of one exec into files (or memory), each capped."""

    def __init__(self, stdout: BinaryIO | None, stderr: BinaryIO | None, cap: int) -> None:
        self._sinks: dict[int, BinaryIO | None] = {STDOUT: stdout, STDERR: stderr}
        self._kept = {STDOUT: bytearray(), STDERR: bytearray()}
        self._written = {STDOUT: 0, STDERR: 0}
        self._cap = cap
        self.truncated = False

    def write(self, channel: int, data: bytes) -> None:
        room = self._cap - self._written[channel]
        if room <= 0:
            self.truncated = True
            return
        if len(data) > room:
            data, self.truncated = data[:room], True
        self._written[channel] += len(data)
        sink = self._sinks.get(channel)
        if sink is None:
            self._kept[channel] += data
        else:
            sink.write(data)
            sink.flush()

    def kept(self, channel: int) -> bytes | None:
        return bytes(self._kept[channel]) if self._sinks.get(channel) is None else None


class _StdoutReader(io.RawIOBase):
    """An exec's stdout as a readable file (stderr kept aside, capped); SandboxError past the deadline."""

    def __init__(self, channel: ExecChannel, deadline: float, what: str) -> None:
        self._channel = channel
        self._deadline = deadline
        self._what = what
        self._buf = b""
        self.stderr = bytearray()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._buf:
            closed = not self._channel.is_open()
            if not closed and time.monotonic() > self._deadline:
                raise SandboxError(f"{self._what} took longer than {COPY_TIMEOUT_S:g} s")
            if not self._take(self._channel.read(0 if closed else _POLL_S)) and closed:
                return 0
        with memoryview(buffer) as view:
            n = min(len(view), len(self._buf))
            view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def _take(self, chunks: list[tuple[int, bytes]]) -> int:
        """Keep what arrived; how many stdout bytes that was."""
        taken = 0
        for channel, data in chunks:
            if channel == STDOUT:
                self._buf += data
                taken += len(data)
            elif len(self.stderr) < MAX_ERROR_BYTES:
                self.stderr += data[:MAX_ERROR_BYTES - len(self.stderr)]
        return taken


class KubernetesSandbox(Sandbox):
    """A running case Pod. `on_destroy` releases what the backend holds for it (its relay token)."""

    def __init__(self, api: PodApi, spec: SandboxSpec, *, name: str,
                 on_destroy: Callable[[], None] | None = None) -> None:
        self._api = api
        self._spec = spec
        self._name = name
        self._on_destroy = on_destroy
        self._lock = threading.Lock()
        self._frozen = threading.Event()
        self._destroyed = False
        self._counters = CgroupCounters(oom_kills=0, pids_refused=0)

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    @property
    def name(self) -> str:
        return self._name

    @property
    def frozen(self) -> bool:
        return self._frozen.is_set()

    def _require_running(self, action: str) -> None:
        if self._destroyed:
            raise SandboxError(f"cannot {action}: sandbox {self._name} was destroyed")
        if self._frozen.is_set():
            raise SandboxError(f"cannot {action}: sandbox {self._name} is frozen (its deadline passed)")

    def _check_user(self, user: str | None) -> None:
        if user is not None and user != self._spec.hardening.user:
            raise SandboxError(f"a Pod exec runs as the Pod's user ({self._spec.hardening.user}), not {user}")

    def _start(self, argv: list[str], *, stdin: bool, container: str = ko.AGENT) -> ExecChannel:
        return self._api.exec(self._name, container, argv, stdin=stdin)

    # ---- exec ---------------------------------------------------------------------------

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
        self._require_running("run a command")
        self._check_user(user)
        environment = dict(env or {})
        marker = None
        if on_timeout == "kill_exec":
            marker = secrets.token_hex(8)
            environment[ps.EXEC_MARKER] = marker
        started = time.monotonic()
        deadline = started + timeout if timeout is not None else None
        before = self._counters
        output = _Output(stdout, stderr, max_output_bytes)
        channel = self._start(wrap_command(cmd, environment, cwd), stdin=stdin is not None)
        exit_code: int | None = None
        deadline_hit = False
        after: CgroupCounters | None = None
        try:
            if stdin is not None:
                channel.write_stdin(stdin)
                channel.close_stdin()
            ended = self._drain(channel, output, deadline)
            if not ended:
                deadline_hit = True
                if on_timeout == "kill_exec" and marker is not None:
                    exit_code = self._kill_exec(channel, output, marker)
                else:
                    after = self._probe(attempts=1)  # now: a stopped sandbox runs nothing of its own
                    self.freeze()
            else:
                exit_code = channel.exit_code()
        finally:
            channel.close()
        duration = time.monotonic() - started
        if self._destroyed:
            raise SandboxError(f"sandbox {self._name} was destroyed while a command ran")
        if not self._frozen.is_set():
            after = self._probe()
        if exit_code is None and not deadline_hit:
            raise SandboxError(f"a command in sandbox {self._name} ended without an exit code (the exec stream "
                               "broke off, or the Pod went away)")
        if after is not None:
            oom: int | None = after.oom_kills - before.oom_kills
            pids_hit: bool | None = after.pids_refused > before.pids_refused
        else:
            oom, pids_hit = None, None
        reason, sig = classify_end(exit_code=exit_code, deadline_hit=deadline_hit, oom_kills=oom)
        return ExecResult(exit_code=exit_code, end_reason=reason, signal=sig, duration_s=duration, oom_kills=oom,
                          pids_limit_hit=pids_hit, stdout=output.kept(STDOUT), stderr=output.kept(STDERR),
                          output_truncated=output.truncated)

    def _drain(self, channel: ExecChannel, output: _Output, deadline: float | None) -> bool:
        """Copy output until the command ends (True) or the deadline or a freeze comes (False)."""
        while True:
            if self._destroyed:
                raise SandboxError(f"sandbox {self._name} was destroyed while a command ran")
            now = time.monotonic()
            if (deadline is not None and now >= deadline) or self._frozen.is_set():
                return False
            wait = _POLL_S if deadline is None else max(0.0, min(_POLL_S, deadline - now))
            for stream, data in channel.read(wait):
                output.write(stream, data)
            if not channel.is_open():
                for stream, data in channel.read(0):
                    output.write(stream, data)
                return True

    def _kill_exec(self, channel: ExecChannel, output: _Output, marker: str) -> int | None:
        """Kill the command's processes only; if that fails, freeze the sandbox."""
        try:
            self._run_quietly(ps.interpreter(ps.KILLER, f"{ps.EXEC_MARKER}={marker}"))
            end = time.monotonic() + _KILL_WAIT_S
            while time.monotonic() < end:
                for stream, data in channel.read(0.05):
                    output.write(stream, data)
                if not channel.is_open():
                    return channel.exit_code()
        except SandboxError:
            if self._destroyed:
                raise
        self.freeze()
        return None

    def _run_quietly(self, argv: list[str], timeout: float = _HOUSEKEEPING_S) -> tuple[int | None, bytes]:
        """Run a housekeeping command to its end; (exit code, stdout)."""
        channel = self._start(argv, stdin=False)
        out = bytearray()
        try:
            end = time.monotonic() + timeout
            while channel.is_open() and time.monotonic() < end:
                out += b"".join(d for s, d in channel.read(_POLL_S) if s == STDOUT)
            out += b"".join(d for s, d in channel.read(0) if s == STDOUT)
            return channel.exit_code(), bytes(out)
        finally:
            channel.close()

    def _probe(self, attempts: int = 3) -> CgroupCounters | None:
        for attempt in range(attempts):
            if attempt:
                time.sleep(0.2)
            try:
                _, output = self._run_quietly(list(PROBE_CMD), timeout=10.0)
            except SandboxError:
                continue
            counters = parse_probe(output.decode(errors="replace"))
            if counters is not None:
                self._counters = counters
                return counters
        return None

    # ---- files ----------------------------------------------------------------------------

    @property
    def _uid(self) -> int:
        return self._spec.hardening.uid

    @property
    def _gid(self) -> int:
        return self._spec.hardening.gid

    def copy_in(self, src_dir: Path, dest: str, *, exclude: Callable[[str], bool] | None = None) -> CopyInReport:
        return self._put(dest, lambda out: tar_from_dir(src_dir, out, uid=self._uid, gid=self._gid, exclude=exclude))

    def copy_in_files(self, files: Mapping[str, bytes], dest: str, *, mode: int = 0o644) -> CopyInReport:
        return self._put(dest, lambda out: tar_from_files(files, out, uid=self._uid, gid=self._gid, mode=mode))

    def _put(self, dest: str, write_tar: Callable[[IO[bytes]], CopyInReport], *,
             container: str = ko.AGENT) -> CopyInReport:
        self._require_running("copy files in")
        return put_tar(self._api, self._name, container, dest, write_tar)

    def copy_out(self, src: str, dest_dir: Path, *, max_bytes: int, max_files: int,
                 stop: threading.Event | None = None) -> CopyOutReport:
        if self._destroyed:
            raise SandboxError(f"cannot copy {src} out: sandbox {self._name} was destroyed")
        channel = self._start(["sh", "-c", COPY_OUT_SCRIPT, "sh", src], stdin=False)
        try:
            reader = _StdoutReader(channel, time.monotonic() + COPY_TIMEOUT_S, f"copying {src} out of {self._name}")
            stream = io.BufferedReader(reader, buffer_size=MiB)
            kind = stream.read(2)
            if kind == b"N\n":
                return CopyOutReport(found=False)
            if kind not in (b"D\n", b"F\n"):
                detail = bytes(reader.stderr).decode(errors="replace").strip()[:300]
                raise SandboxError(f"copying {src} out of sandbox {self._name} failed: {detail or 'no archive'}")
            try:
                return extract_tar(stream, dest_dir, strip_top=None, max_bytes=max_bytes, max_files=max_files,
                                   stop=stop)
            except UnsafeArchiveError as exc:
                if "not a valid tar stream" in exc.message and reader.stderr:
                    raise SandboxError(f"copying {src} out of sandbox {self._name} failed: "
                                       f"{bytes(reader.stderr).decode(errors='replace').strip()[:300]}") from exc
                raise
        finally:
            channel.close()

    # ---- lifecycle ------------------------------------------------------------------------

    def freeze(self) -> None:
        with self._lock:
            if self._destroyed or self._frozen.is_set():
                return
            # Best effort against a full pids table: the deadline stands either way, and exec
            # refuses from here on.
            for attempt in range(5):
                try:
                    code, _ = self._run_quietly(ps.interpreter(ps.STOP_ALL), timeout=10.0)
                except SandboxError:
                    code = None
                if code == 0:
                    break
                time.sleep(0.1 * (attempt + 1))
            self._frozen.set()

    def thaw(self) -> bool:
        with self._lock:
            if self._destroyed:
                return False
            if not self._frozen.is_set():
                return True
            for attempt in range(20):
                try:
                    code, _ = self._run_quietly(ps.interpreter(ps.KILL_ALL), timeout=10.0)
                except SandboxError:
                    code = None
                if code == 0:
                    self._frozen.clear()
                    return True
                time.sleep(0.1 * (attempt + 1))
            return False

    def destroy(self) -> None:
        with self._lock:
            if self._destroyed:
                return
            self._destroyed = True
            self._frozen.set()  # wakes any exec still waiting on this sandbox
        try:
            self._api.delete_pod(self._name)
        finally:
            if self._on_destroy is not None:
                self._on_destroy()


def put_tar(api: PodApi, pod: str, container: str, dest: str,
            write_tar: Callable[[IO[bytes]], CopyInReport]) -> CopyInReport:
    """Stream a tar made by `write_tar` into `dest` of a container (made if missing), over exec."""
    with tempfile.SpooledTemporaryFile(max_size=32 * MiB) as buf:
        report = write_tar(buf)
        buf.seek(0)
        channel = api.exec(pod, container, ["sh", "-c", COPY_IN_SCRIPT, "sh", dest], stdin=True)
        errors = bytearray()
        try:
            while chunk := buf.read(MiB):
                channel.write_stdin(chunk)
                errors += b"".join(d for s, d in channel.read(0) if s == STDERR)
            channel.close_stdin()
            end = time.monotonic() + COPY_TIMEOUT_S
            while channel.is_open() and time.monotonic() < end:
                errors += b"".join(d for s, d in channel.read(_POLL_S) if s == STDERR)
            errors += b"".join(d for s, d in channel.read(0) if s == STDERR)
            code = channel.exit_code()
        finally:
            channel.close()
    if code != 0:
        detail = bytes(errors[:MAX_ERROR_BYTES]).decode(errors="replace").strip()[:300]
        raise SandboxError(f"copying files into {dest} of Pod {pod} ({container}) failed "
                           f"(exit {code}): {detail or 'no message'}")
    return report


def touch(api: PodApi, pod: str, container: str, path: str) -> None:
    channel = api.exec(pod, container, ["python3", "-I", "-c", "import sys;open(sys.argv[1],'w').close()", path],
                       stdin=False)
    with contextlib.closing(_Closer(channel)):
        end = time.monotonic() + _HOUSEKEEPING_S
        while channel.is_open() and time.monotonic() < end:
            channel.read(_POLL_S)
        if channel.exit_code() != 0:
            raise SandboxError(f"could not hand the control files over in Pod {pod}")


class _Closer:
    def __init__(self, channel: ExecChannel) -> None:
        self._channel = channel

    def close(self) -> None:
        self._channel.close()
