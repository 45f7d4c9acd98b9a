"""One case's Docker container: exec with deadlines, copy in and out, freeze, destroy.

The container's main process (the lifeline of sandbox/lifeline.py under docker-init,
as another user than the agent's) only waits for its controller to go away;
everything else runs through `docker exec` as the sandbox user. The workspace and $HOME are tmpfs-backed
volumes: the archive API sees them, but their data lives only while the
container does, so results are copied out while it is running or paused,
never after it stopped. At a deadline the container is paused, which freezes
every process at once (fork bombs included) and keeps the files.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import secrets
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

import docker
import docker.errors
from docker.utils.socket import frames_iter

from agent_eval_sandbox.errors import DockerUnavailableError
from agent_eval_sandbox.inside import exit_archive
from agent_eval_sandbox.inside import standby as standby_
from agent_eval_sandbox.sandbox.archive import (
    ChunkStream,
    CopyInReport,
    CopyOutReport,
    extract_tar,
    tar_from_dir,
    tar_from_files,
)
from agent_eval_sandbox.sandbox.base import (
    BindMount,
    ExecResult,
    MiB,
    OnTimeout,
    Sandbox,
    SandboxError,
    SandboxInfraError,
    SandboxSpec,
)
from agent_eval_sandbox.sandbox.docker_errors import close_stream, docker_errors
from agent_eval_sandbox.sandbox.held_dirs import HeldDir
from agent_eval_sandbox.sandbox.lifeline import MAIN_USER, Lifeline
from agent_eval_sandbox.sandbox.outcome import (
    PROBE_CMD,
    CgroupCounters,
    classify_end,
    host_cgroup_files,
    parse_probe,
    probe_lines,
)
from agent_eval_sandbox.sandbox.process_scripts import EXEC_MARKER, KILL_LEFTOVERS, interpreter
from agent_eval_sandbox.sandbox.process_scripts import KILLER as _KILLER

_KILL_WAIT_S = 5.0
# How long one of our own short commands in a sandbox (the counters' probe, the killer, the reaper)
# may take before it counts as hung, and how much of its output is kept.
_BRIEF_EXEC_S = 15.0
_BRIEF_OUTPUT_BYTES = 64 * 1024
# After the command exited, output its last writes may still be in flight.
_LINGER_S = 0.3
# While its output is open a command is still running, but for a child it left holding that output:
# the daemon is asked about it only now and then (each ask costs the controller and the daemon ~1 ms
# of CPU), and at once when the output ends.
_FIRST_POLL_S = 0.25
_MAX_POLL_S = 1.0
_EXIT_POLL_S = 0.005
_GO_MODE_DIR = 1 << 31  # os.ModeDir in the stat header of Docker's archive API
# The first files copied in while the launcher waits on standby go in with its go line, up to this much.
_DEFERRED_MAX_BYTES = 16 * MiB
# The launcher archives what it is asked to copy out up to this much: its tar (Python, within the
# sandbox's CPU limit) beats Docker's archive API (a helper of the daemon's, ~35 ms a call, one call
# of a container at a time) for the small trees of most cases, not for big ones, which it leaves to it
# (measured: 100 files 163 against 189 ms, 100 files of 70 KB 214 against 264, 900 files 1,323 against 1,207).
_EXIT_ARCHIVE_MAX_BYTES = 8 * MiB
_EXIT_ARCHIVE_MAX_FILES = 300


class _NeverEnded(SandboxError):
    """One of our own short commands started and did not end in time (`_BRIEF_EXEC_S`)."""


class _Pump(threading.Thread):
    """Copies an exec's multiplexed output to its sinks until EOF or close()."""

    def __init__(self, sock: Any, stdout: BinaryIO | None, stderr: BinaryIO | None, cap: int) -> None:
        super().__init__(daemon=True, name="sandbox-exec-output")
        self._sock = sock
        self._raw: socket.socket = getattr(sock, "_sock", sock)
        self._raw.settimeout(None)  # long commands are silent for minutes
        self._sinks: dict[int, BinaryIO | None] = {1: stdout, 2: stderr}
        self._kept = {1: bytearray(), 2: bytearray()}
        self._written = {1: 0, 2: 0}
        self._cap = cap
        self._frames: exit_archive.FrameReader | None = None
        self.truncated = False
        self.error: BaseException | None = None
        self.done = threading.Event()

    def frame_stdout(self, collect: exit_archive.Collect) -> exit_archive.FrameReader:
        """Read stdout as the launcher frames it when it collects files (before `start`): the agent's
        output goes on to the sink, the archives stay in the reader."""
        self._frames = exit_archive.FrameReader(lambda data: self._write(1, data), collect)
        return self._frames

    def run(self) -> None:
        try:
            for stream, data in frames_iter(self._sock, tty=False):
                if stream == 1 and self._frames is not None:
                    self._frames.feed(data)
                elif stream in self._sinks:
                    self._write(stream, data)
        except OSError:
            pass  # the socket was shut down by close()
        except BaseException as exc:  # a sink that failed (disk full, closed file)
            self.error = exc
        finally:
            self.done.set()

    def _write(self, stream: int, data: bytes) -> None:
        room = self._cap - self._written[stream]
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        if not data:
            return
        self._written[stream] += len(data)
        sink = self._sinks[stream]
        if sink is None:
            self._kept[stream] += data
        else:
            sink.write(data)
            sink.flush()

    def feed(self, data: bytes) -> None:
        def send() -> None:
            try:
                self._raw.sendall(data)
                self._raw.shutdown(socket.SHUT_WR)  # EOF on the command's stdin
            except OSError:
                pass  # the command exited without reading all of it

        threading.Thread(target=send, daemon=True, name="sandbox-exec-stdin").start()

    def close(self) -> None:
        try:
            self._raw.shutdown(socket.SHUT_RDWR)  # wakes the reader if a child still holds stdout
        except OSError:
            pass
        self.join(timeout=5)
        if self.is_alive():  # still reading: its descriptor goes with the stream's garbage
            self._sock.close()
        else:
            close_stream(self._sock)

    def kept(self, stream: int) -> bytes | None:
        return bytes(self._kept[stream]) if self._sinks[stream] is None else None


def mount_points_within(dest: str, mounts: Sequence[BindMount]) -> set[str]:
    """The paths below `dest` (relative) that its bind mounts occupy: each mount's target and the
    directories runc makes for it, owned by root — only `docker cp`, as root, may write there."""
    occupied: set[str] = set()
    for mount in mounts:
        rel = posixpath.relpath(mount.target, dest)
        if rel == "." or rel.startswith(".."):
            continue
        parts = rel.split("/")
        occupied.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return occupied


def touches_mount_points(names: Sequence[str], dest: str, mounts: Sequence[BindMount]) -> bool:
    """Whether an archive unpacked into `dest` would write at or below a mount point (`mount_points_within`)."""
    occupied = mount_points_within(dest, mounts)
    if not occupied:
        return False
    for name in names:
        path = posixpath.normpath(name.lstrip("/"))
        if any(path == place or path.startswith(place + "/") for place in occupied):
            return True
    return False


def _member_names(buf: IO[bytes]) -> list[str]:
    buf.seek(0)
    with tarfile.open(fileobj=buf, mode="r:") as tar:
        return tar.getnames()


class _Standby:
    """A launcher started ahead (`inside/standby.py`): its exec and the stream attached to it."""

    def __init__(self, launcher: tuple[str, ...], exec_id: str, sock: Any) -> None:
        self.launcher, self.exec_id, self.sock = launcher, exec_id, sock

    def close(self) -> None:
        """End of input without a go line: the launcher starts nothing and exits."""
        close_stream(self.sock)


def _go_input(argv: list[str], env: dict[str, str], cwd: str | None, deferred: Sequence[tuple[str, bytes]],
              collect: exit_archive.Collect | None) -> bytes:
    """What the launcher on standby reads: its go line, then the archives deferred for it."""
    archives = [standby_.Archive(dest, len(data)) for dest, data in deferred]
    go = standby_.encode(argv, env, cwd, archives, collect.to_json() if collect is not None else None)
    return b"".join([go, *(data for _, data in deferred)])


class DockerSandbox(Sandbox):
    def __init__(
        self,
        client: docker.DockerClient,
        spec: SandboxSpec,
        *,
        container_id: str,
        name: str,
        lifeline: Lifeline | None = None,
        host_dir: HeldDir | None = None,
        on_host_kernel: bool = False,
    ) -> None:
        self._api = client.api
        self._spec = spec
        self._id = container_id
        self._name = name
        self._lifeline = lifeline
        self._host_dir = host_dir  # the host files it mounts, if it has any of its own
        self._lock = threading.Lock()
        self._frozen = threading.Event()
        self._destroyed = False
        # A new container's cgroup starts at zero; every probe moves this forward.
        self._counters = CgroupCounters(oom_kills=0, pids_refused=0)
        self._standby: _Standby | None = None
        # Copied in while the launcher waited on standby: (dest, tar), sent with its go line.
        self._deferred: list[tuple[str, bytes]] = []
        # Nothing was copied in and nothing ran yet: the launcher unpacks into empty volumes only, so
        # it never meets a file it may not overwrite as the sandbox user (docker cp writes as root).
        self._pristine = True
        # What the next exec's launcher is to archive as its agent exits (`expect_copy_out`), and
        # what it did archive, for the copy_outs that follow before anything else touches the files.
        self._expected: exit_archive.Collect | None = None
        # Its runtime, or the daemon's default one, runs it on the host's kernel (runc, crun: see
        # sandbox/runtimes.py). Only there is the launcher's stdout its own (gVisor lets the sandbox
        # user open the descriptors of its other processes through /proc whatever their dumpable
        # flag: tests/integration/attacks/test_attack_forged_events.py), so elsewhere the copy-out
        # stays Docker's; and only there is the container's cgroup on the host the one the agent's
        # processes count against.
        self._on_host_kernel = on_host_kernel
        self._exit_archives: dict[str, exit_archive.ExitArchive] = {}

    @property
    def spec(self) -> SandboxSpec:
        return self._spec

    @property
    def name(self) -> str:
        return self._name

    @property
    def container_id(self) -> str:
        return self._id

    @property
    def frozen(self) -> bool:
        return self._frozen.is_set()

    def _require_running(self, action: str) -> None:
        if self._destroyed:
            raise SandboxError(f"cannot {action}: sandbox {self._name} was destroyed")
        if self._frozen.is_set():
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
        self._require_running("run a command")
        self._drop_exit_archives()
        collect, self._expected = self._expected, None
        environment = dict(env or {})
        marker = None
        if on_timeout == "kill_exec":
            marker = secrets.token_hex(8)
            environment[EXEC_MARKER] = marker
        waiting, deferred = self._take_standby(cmd, user=user, stdin=stdin, marked=marker is not None)
        frames: exit_archive.FrameReader | None = None
        started = time.monotonic()
        deadline = started + timeout if timeout is not None else None
        before = self._counters
        try:
            with docker_errors(f"starting {list(cmd)[:1]} in sandbox {self._name}"):
                if waiting is not None:
                    exec_id = waiting.exec_id
                    pump = _Pump(waiting.sock, stdout, stderr, max_output_bytes)
                    frames = pump.frame_stdout(collect) if collect is not None else None
                    stdin = _go_input(list(cmd[len(waiting.launcher):]), environment, cwd, deferred, collect)
                else:
                    self._put_deferred()
                    self._pristine = False
                    exec_id = self._api.exec_create(
                        self._id,
                        list(cmd),
                        stdout=True,
                        stderr=True,
                        stdin=stdin is not None,
                        user=user or self._spec.hardening.user,
                        environment=environment or None,
                        workdir=cwd,
                    )["Id"]
                    pump = _Pump(self._api.exec_start(exec_id, socket=True), stdout, stderr, max_output_bytes)
        except (SandboxError, DockerUnavailableError) as exc:
            if self._destroyed:
                raise SandboxError(f"cannot run a command: sandbox {self._name} was destroyed") from exc
            # Nothing of the command ran yet: the daemon failed us, not the command.
            raise SandboxInfraError(str(exc)) from exc
        pump.start()
        if stdin is not None:
            pump.feed(stdin)
        exit_code: int | None = None
        deadline_hit = False
        after: CgroupCounters | None = None
        try:
            info = self._wait(exec_id, pump, deadline)
            if info is None:
                deadline_hit = True
                if on_timeout == "kill_exec" and marker is not None:
                    exit_code = self._kill_exec(exec_id, marker, user)
                else:
                    after = self._probe(attempts=1)  # now: a paused sandbox runs nothing, not even a probe
                    self.freeze()
            else:
                exit_code = info["ExitCode"]
        finally:
            pump.close()
        duration = time.monotonic() - started
        self._keep_exit_archives(frames, exited=exit_code is not None and not deadline_hit and pump.error is None)
        if pump.error is not None:
            raise pump.error
        if not self._frozen.is_set():
            # If the command left a child holding its output open, the daemon
            # takes ~2-4 s to let the next exec (this probe) start.
            after = self._probe()
        if exit_code is None and not deadline_hit:
            raise SandboxError(f"a command in sandbox {self._name} vanished without an exit code")
        if after is not None:
            oom: int | None = after.oom_kills - before.oom_kills
            pids_hit: bool | None = after.pids_refused > before.pids_refused
        else:
            oom, pids_hit = None, self._pids_exhausted()
        self._require_alive_after(exit_code, deadline_hit=deadline_hit, counted=after is not None, oom=oom)
        reason, sig = classify_end(exit_code=exit_code, deadline_hit=deadline_hit, oom_kills=oom)
        return ExecResult(
            exit_code=exit_code,
            end_reason=reason,
            signal=sig,
            duration_s=duration,
            oom_kills=oom,
            pids_limit_hit=pids_hit,
            stdout=pump.kept(1),
            stderr=pump.kept(2),
            output_truncated=pump.truncated,
        )

    # ---- the launcher on standby (inside/standby.py) ---------------------------------------

    def stand_by(self) -> None:
        """Start the spec's launcher on standby, so that the case's agent need not wait for an exec.

        A failure here costs only the speed-up: the agent's exec then starts the launcher itself.
        """
        launcher = tuple(self._spec.standby)
        if not launcher or self._standby is not None:
            return
        try:
            with docker_errors(f"starting the launcher of sandbox {self._name} on standby"):
                exec_id = self._api.exec_create(self._id, [*launcher, standby_.FLAG], stdout=True, stderr=True,
                                                stdin=True, user=self._spec.hardening.user,
                                                workdir=self._spec.workspace)["Id"]
                self._standby = _Standby(launcher, exec_id, self._api.exec_start(exec_id, socket=True))
        except (SandboxError, DockerUnavailableError):
            self._standby = None

    def _take_standby(self, cmd: Sequence[str], *, user: str | None, stdin: bytes | None,
                      marked: bool) -> tuple[_Standby | None, list[tuple[str, bytes]]]:
        """The launcher on standby if this command is its to run, at most once, and the files that go in
        with it; else None (and the files stay for `_put_deferred`).

        Not for a command with input of its own, another user, or one "kill_exec" must find by its
        environment marker (the launcher's own environment is the one it was started with): such a
        launcher command ends the one on standby, unused, before it starts."""
        with self._lock:
            waiting = self._standby
            if waiting is None or tuple(cmd[:len(waiting.launcher)]) != waiting.launcher:
                return None, []
            self._standby = None
            if stdin is not None or marked or (user or self._spec.hardening.user) != self._spec.hardening.user:
                # Started some other way (a pipeline step's prompt comes on stdin): no launcher may go
                # on waiting beside the agent, whose processes could signal it or, under gVisor, open it.
                waiting.close()
                return None, []
        try:
            with docker_errors(f"checking the launcher of sandbox {self._name}"):
                alive = bool(self._api.exec_inspect(waiting.exec_id)["Running"])
        except (SandboxError, DockerUnavailableError):
            alive = False
        if not alive:  # it ended before its case came: start the command the usual way
            waiting.close()
            return None, []
        with self._lock:
            deferred, self._deferred = self._deferred, []
        return waiting, deferred

    def _inspect(self, exec_id: str) -> dict[str, Any]:
        try:
            with docker_errors(f"watching a command in sandbox {self._name}"):
                info: dict[str, Any] = self._api.exec_inspect(exec_id)
                return info
        except SandboxError:
            if self._destroyed:
                raise SandboxError(f"sandbox {self._name} was destroyed while a command ran") from None
            # The daemon forgets a stopped container's commands: say why it stopped, if it did.
            stopped = self._stopped()
            if stopped is not None:
                raise SandboxError(f"sandbox {self._name} stopped while a command ran ({stopped})") from None
            raise

    def _wait(self, exec_id: str, pump: _Pump, deadline: float | None) -> dict[str, Any] | None:
        """The final exec_inspect, or None when the deadline (or a freeze) came first.

        The output stream's end is only a hint: a background child can keep it
        open after the command exited, and a command can close it and go on.
        """
        poll = _FIRST_POLL_S
        ended_output = False
        while True:
            if self._destroyed:
                raise SandboxError(f"sandbox {self._name} was destroyed while a command ran")
            now = time.monotonic()
            if (deadline is not None and now >= deadline) or self._frozen.is_set():
                return None
            if pump.done.is_set() and not ended_output:
                # Its output just ended: the command is most likely exiting, and the daemon reports
                # that a moment later. Look again soon, not after a poll grown long while it ran.
                ended_output, poll = True, _EXIT_POLL_S
            wait = poll if deadline is None else min(poll, deadline - now)
            if pump.done.is_set():
                self._frozen.wait(wait)
            else:
                pump.done.wait(wait)
            info = self._inspect(exec_id)
            if self._destroyed:  # its end was the removal, not the command's own
                raise SandboxError(f"sandbox {self._name} was destroyed while a command ran")
            if not info["Running"]:
                pump.done.wait(_LINGER_S)
                return info
            poll = min(poll * 1.5, _MAX_POLL_S)

    def _kill_exec(self, exec_id: str, marker: str, user: str | None) -> int | None:
        """Kill the command's processes only; if that fails, freeze the sandbox."""
        try:
            with docker_errors(f"killing a command in sandbox {self._name}"):
                killer = self._api.exec_create(
                    self._id, interpreter(_KILLER, f"{EXEC_MARKER}={marker}"),
                    user=user or self._spec.hardening.user,
                )
                self._brief_output(killer["Id"], "the killer")
            end = time.monotonic() + _KILL_WAIT_S
            while time.monotonic() < end:
                info = self._inspect(exec_id)
                if not info["Running"]:
                    exit_code: int | None = info["ExitCode"]
                    return exit_code
                time.sleep(0.05)
        except SandboxError:
            if self._destroyed:
                raise
        self.freeze()
        return None

    def _probe(self, attempts: int = 3) -> CgroupCounters | None:
        """The sandbox's cgroup counters: from the host's cgroup files on the host's kernel, else read by a
        command inside it.

        With the pids table full even that command may fail to start; a
        short-lived fork bomb frees it again within moments, hence the retries.
        """
        counters = self._host_counters()
        if counters is None:
            counters = self._probe_inside(attempts)
        if counters is not None:
            self._counters = counters
        return counters

    def _probe_inside(self, attempts: int) -> CgroupCounters | None:
        for attempt in range(attempts):
            if attempt:
                time.sleep(0.2)
            try:
                with docker_errors("reading cgroup counters"):
                    # As `nobody`, not the agent's user: a process the agent left behind cannot open the
                    # probe's stdout (/proc/<pid>/fd/1) to write counter lines of its own into it.
                    probe = self._api.exec_create(self._id, list(PROBE_CMD), user=MAIN_USER)
                    output = self._brief_output(probe["Id"], "the counters' probe")
            except SandboxError:
                if self._stopped() is not None:
                    return None  # nothing to count in a sandbox that is gone
                continue
            counters = parse_probe(output.decode(errors="replace"))
            if counters is not None:
                return counters
        return None

    def _brief_output(self, exec_id: str, what: str) -> bytes:
        """Start one of our own short commands and return its output (stdout, then stderr).

        Never waits for it for good: docker-py reads an exec's output without any timeout, and a
        gVisor sandbox that dies as the command starts leaves that stream open (found by the red
        team: the case never ended, past its deadline, and Ctrl-C waited for it too).
        """
        pump = _Pump(self._api.exec_start(exec_id, socket=True), None, None, _BRIEF_OUTPUT_BYTES)
        pump.start()
        ended = pump.done.wait(_BRIEF_EXEC_S)
        pump.close()
        if not ended:
            raise _NeverEnded(f"{what} in sandbox {self._name} had not ended after {_BRIEF_EXEC_S:g}s")
        return (pump.kept(1) or b"") + (pump.kept(2) or b"")

    def _host_counters(self) -> CgroupCounters | None:
        """The counters from the container's cgroup on this host: no exec on the case's critical path.

        Only on the host's kernel (runc, crun), whose container cgroup is the one the probe reads
        inside (gVisor keeps its own); None when this host does not show it
        (another cgroup layout, a daemon elsewhere).
        """
        if not self._on_host_kernel:
            return None
        for memory, pids in host_cgroup_files(self._id):
            try:
                text = probe_lines(memory, Path(memory).read_text()) + probe_lines(pids, Path(pids).read_text())
            except OSError:
                continue
            return parse_probe(text)
        return None

    def _require_alive_after(self, exit_code: int | None, *, deadline_hit: bool, counted: bool,
                             oom: int | None) -> None:
        """Raise if the sandbox itself is gone, and with it the command that just ended by itself.

        Its exit code is then the runtime's, not the command's own: under gVisor a memory hog takes
        the whole sandbox down and the command "exits" 128; a container killed from outside ends
        its command with 137. Looked at when no counters could be read, or a signal no OOM kill
        explains ended the command: the daemon learns of the container's end a moment after the
        command's, so that case looks a few times (at most 0.35 s, on a path that is rare).
        """
        signaled = exit_code is not None and exit_code >= 128 and not oom
        if deadline_hit or (counted and not signaled):
            return
        for pause in (0.0, 0.05, 0.1, 0.2) if signaled else (0.0,):
            time.sleep(pause)
            stopped = self._stopped()
            if stopped is not None:
                self._drop_exit_archives()
                raise SandboxError(f"sandbox {self._name} stopped while a command ran or as it ended ({stopped}): "
                                   f"neither the command's exit code ({exit_code}) nor its files can be trusted")

    def _stopped(self) -> str | None:
        """How the sandbox's container stopped, or None while it runs (or cannot be inspected)."""
        try:
            state = self._state()
        except SandboxError:
            return None
        if state.get("Running", True):
            return None
        if state.get("OOMKilled"):
            return "it ran out of memory: its memory limit killed it whole"
        return f"its container ended with exit code {state.get('ExitCode')}"

    def _pids_exhausted(self) -> bool | None:
        """From the daemon's stats, for when no probe can start (a full pids table stops exec too)."""
        try:
            with docker_errors("reading sandbox stats"):
                pids = self._api.stats(self._id, stream=False, one_shot=True).get("pids_stats") or {}
        except SandboxError:
            return None
        if "current" not in pids or not pids.get("limit"):
            return None
        return bool(pids["current"] >= pids["limit"])

    # ---- files --------------------------------------------------------------------

    def copy_in(self, src_dir: Path, dest: str, *, exclude: Callable[[str], bool] | None = None) -> CopyInReport:
        return self._put(dest, lambda out: tar_from_dir(src_dir, out, uid=self._uid, gid=self._gid, exclude=exclude))

    def copy_in_files(self, files: Mapping[str, bytes], dest: str, *, mode: int = 0o644) -> CopyInReport:
        return self._put(dest, lambda out: tar_from_files(files, out, uid=self._uid, gid=self._gid, mode=mode))

    @property
    def _uid(self) -> int:
        return self._spec.hardening.uid

    @property
    def _gid(self) -> int:
        return self._spec.hardening.gid

    def _put(self, dest: str, write_tar: Callable[[IO[bytes]], CopyInReport]) -> CopyInReport:
        self._require_running("copy files in")
        self._drop_exit_archives()
        with tempfile.SpooledTemporaryFile(max_size=32 * MiB) as buf:
            report = write_tar(buf)
            size = buf.tell()
            with self._lock:
                # While the launcher waits on standby, the first files go in with its go line (no docker cp).
                if (self._standby is not None and self._pristine and size <= _DEFERRED_MAX_BYTES
                        and not touches_mount_points(_member_names(buf), dest, self._spec.mounts)):
                    buf.seek(0)
                    self._deferred.append((dest, buf.read()))
                    self._pristine = False
                    return report
            self._put_deferred()  # what was copied in before goes in first
            buf.seek(0)
            self._put_now(dest, buf)
        return report

    def _put_deferred(self) -> None:
        """Copy in what waits for the launcher on standby: something else needs the files now."""
        with self._lock:
            deferred, self._deferred = self._deferred, []
        for dest, data in deferred:
            self._put_now(dest, io.BytesIO(data))

    def _put_now(self, dest: str, buf: IO[bytes]) -> None:
        self._pristine = False
        with docker_errors(f"copying files into {dest} of sandbox {self._name}"):
            try:
                self._api.put_archive(self._id, dest, buf)
            except docker.errors.NotFound:
                made = self.exec(["mkdir", "-p", "--", dest])
                if not made.ok:
                    raise SandboxError(
                        f"cannot create {dest} in sandbox {self._name}: "
                        f"{(made.stderr or b'').decode(errors='replace').strip()}"
                    ) from None
                buf.seek(0)
                self._api.put_archive(self._id, dest, buf)

    # ---- files archived as the agent exited (inside/exit_archive.py) -------------------------

    def expect_copy_out(self, paths: Sequence[str], *, max_bytes: int, max_files: int) -> None:
        if not self._on_host_kernel:
            return
        self._expected = exit_archive.Collect(list(paths), min(max_bytes, _EXIT_ARCHIVE_MAX_BYTES),
                                              min(max_files, _EXIT_ARCHIVE_MAX_FILES))

    def _keep_exit_archives(self, frames: exit_archive.FrameReader | None, *, exited: bool) -> None:
        """Keep what the launcher archived, if its command exited on its own (at a deadline the
        files are copied out as the freeze left them)."""
        if frames is None:
            return
        taken = frames.archives()
        if exited:
            with self._lock:
                self._exit_archives = taken
            return
        for archive in taken.values():
            archive.close()

    def _drop_exit_archives(self) -> None:
        """Something else is about to touch the files: what was archived at the agent's exit is stale."""
        with self._lock:
            dropped, self._exit_archives = self._exit_archives, {}
        for archive in dropped.values():
            archive.close()

    def _take_exit_archive(self, src: str) -> exit_archive.ExitArchive | None:
        with self._lock:
            return self._exit_archives.pop(src, None)

    def copy_out(self, src: str, dest_dir: Path, *, max_bytes: int, max_files: int,
                 stop: threading.Event | None = None) -> CopyOutReport:
        if self._destroyed:
            raise SandboxError(f"cannot copy {src} out: sandbox {self._name} was destroyed")
        taken = self._take_exit_archive(src)
        if taken is not None:
            try:
                if taken.file is None:
                    return CopyOutReport(found=False)
                # Laid out as Docker's archive of a directory is: its own name on top.
                return extract_tar(cast(BinaryIO, taken.file), dest_dir, strip_top=posixpath.basename(src.rstrip("/")),
                                   max_bytes=max_bytes, max_files=max_files, stop=stop)
            finally:
                taken.close()
        self._put_deferred()
        with docker_errors(f"copying {src} out of sandbox {self._name}"):
            try:
                chunks, st = self._api.get_archive(self._id, src, chunk_size=MiB)
            except docker.errors.NotFound as exc:
                if "No such container" in str(exc.explanation):
                    raise
                return CopyOutReport(found=False)
            strip = st["name"] if st["mode"] & _GO_MODE_DIR else None
            try:
                return extract_tar(
                    io.BufferedReader(ChunkStream(chunks), buffer_size=MiB),
                    dest_dir,
                    strip_top=strip,
                    max_bytes=max_bytes,
                    max_files=max_files,
                    stop=stop,
                )
            finally:
                chunks.close()

    # ---- lifecycle ----------------------------------------------------------------

    def freeze(self) -> None:
        self._drop_exit_archives()
        with self._lock:
            if self._destroyed or self._frozen.is_set():
                return
            try:
                with docker_errors(f"freezing sandbox {self._name}"):
                    self._api.pause(self._id)
            except SandboxError:
                # Already paused is fine; anything else leaves it unfrozen.
                state = self._state()
                if not state.get("Paused"):
                    raise
            self._frozen.set()

    def thaw(self) -> bool:
        with self._lock:
            if self._destroyed:
                return False
            if not self._frozen.is_set():
                return True
            with docker_errors(f"resuming sandbox {self._name}"):
                self._api.unpause(self._id)
            # Resumed processes (a fork bomb too) run again from here: kill them at
            # once, retrying while a full pids table refuses the reaper's exec or some
            # outran it. A reaper that started and never ended was stopped by what it
            # was to kill (it runs as their user): another would be too, so that is the
            # end of it, not 20 more waits for one (a case once took 5 minutes more).
            for attempt in range(20):
                try:
                    with docker_errors("killing the processes of a resumed sandbox"):
                        reaper = self._api.exec_create(self._id, interpreter(KILL_LEFTOVERS),
                                                       user=self._spec.hardening.user)
                        self._brief_output(reaper["Id"], "the reaper")
                        if self._api.exec_inspect(reaper["Id"])["ExitCode"] == 0:
                            self._frozen.clear()
                            return True
                except _NeverEnded:
                    break
                except SandboxError:
                    pass
                time.sleep(0.1 * (attempt + 1))
            with docker_errors(f"freezing sandbox {self._name}"):
                self._api.pause(self._id)
            return False

    def _state(self) -> dict[str, Any]:
        with docker_errors(f"inspecting sandbox {self._name}"):
            state: dict[str, Any] = self._api.inspect_container(self._id)["State"]
            return state

    def destroy(self) -> None:
        self._drop_exit_archives()
        with self._lock:
            self._destroyed = True
            self._frozen.set()  # wakes any exec still waiting on this sandbox
            waiting, self._standby = self._standby, None
            self._deferred = []
            try:
                remove_container(self._api, self._id, on_host_kernel=self._on_host_kernel)
            finally:
                if waiting is not None:
                    waiting.close()
                # After the removal: closing it first would stop the container under a copy-out.
                if self._lifeline is not None:
                    self._lifeline.close()
                if self._host_dir is not None:
                    self._host_dir.release()


def force_remove_container(api: docker.APIClient, container: str, *, on_host_kernel: bool = False) -> None:
    """Remove a container, killing what runs in it; a paused one is resumed first, unless it is known
    to run on the host's kernel (runc, crun), which removes a paused container as quickly as any (one
    API call less).

    runsc (gVisor) cannot signal a paused sandbox: removing one takes ~10 s
    and leaves its containerd task and shim behind, invisible to `docker ps -a`.
    Raises docker.errors.NotFound when the container is already gone.
    """
    if not on_host_kernel and api.inspect_container(container)["State"].get("Paused"):
        with contextlib.suppress(docker.errors.APIError):  # resumed meanwhile: the removal decides
            api.unpause(container)
    api.remove_container(container, force=True, v=True)


def removal_in_progress(exc: docker.errors.APIError) -> bool:
    """The daemon's 409 for a container that another caller is removing at this moment."""
    return exc.status_code == 409 and "in progress" in str(exc.explanation)


def remove_container(api: docker.APIClient, container: str | None, *, on_host_kernel: bool = False) -> None:
    """Remove a container (killing it, paused or not) and with it its volumes; missing is fine, and so is
    a removal already in progress (a SIGTERM's teardown racing the sandbox's own destroy): it is going."""
    if container is None:
        return
    with docker_errors("removing a sandbox"):
        try:
            force_remove_container(api, container, on_host_kernel=on_host_kernel)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if not removal_in_progress(exc):
                raise
