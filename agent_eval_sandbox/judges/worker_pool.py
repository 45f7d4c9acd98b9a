"""Running judge code in worker processes, with a time limit on every sample.

A worker (`judges/_worker.py`) is a long-lived child in its own process
group, reused across samples so judge modules import once. Each call writes
one request and waits for one reply line until its deadline; a worker that
overruns it is killed (with anything it spawned) and replaced, and one that
dies is read for its exit status. Either way only that sample errors.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from agent_eval_sandbox.judges.results import Sample

WORKER_MODULE = "agent_eval_sandbox.judges._worker"
_CHUNK = 65536
_STDERR_TAIL = 400


class _Timeout(Exception):
    pass


class _Died(Exception):
    pass


def _clean(text: str) -> str:
    # Lone surrogates cannot be written to summary.yaml; judges' text may hold them.
    return text.encode("utf-8", "replace").decode("utf-8")


def encode_json(value: Any) -> bytes:
    # default=str: the record is JSON data by construction; this keeps a stray type from ending the run.
    # backslashreplace: a file name that is not UTF-8 reaches the judge as the same (surrogate) string.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8", "backslashreplace")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class JudgeWorker:
    """One worker process; not thread-safe (the pool hands it to one thread at a time)."""

    def __init__(self, cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self._cwd = cwd
        self._env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buffer = bytearray()
        self._next_id = 0

    def _start(self) -> subprocess.Popen[bytes]:
        # Lives as long as the process; close() releases it.
        self._stderr = tempfile.TemporaryFile(prefix="judge-worker-", suffix=".stderr")  # noqa: SIM115
        self._buffer.clear()
        proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, str(self._cwd)],
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # its own process group: a kill takes its children too
            bufsize=0,
        )
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)
        self._proc = proc
        return proc

    def call(self, judge_spec: bytes, arguments: bytes, outputs: bytes, timeout_s: float) -> Sample:
        """Run one sample: `judge_spec`, `arguments`, `outputs` are JSON documents."""
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        self._next_id += 1
        request = b'{"id":%d,"judge":%s,"arguments":%s,"outputs":%s}\n' % (
            self._next_id, judge_spec, arguments, outputs
        )
        assert self._stderr is not None
        stderr_mark = os.fstat(self._stderr.fileno()).st_size
        try:
            line = self._exchange(proc, request, time.monotonic() + timeout_s)
        except _Timeout:
            self.close()
            return Sample.failed(f"the judge did not finish within {timeout_s:g}s and was killed")
        except _Died:
            return Sample.failed(self._death(proc, stderr_mark))
        try:
            reply = json.loads(line)
            if not isinstance(reply, dict) or reply.get("id") != self._next_id:
                raise ValueError("reply does not answer the request")
        except ValueError as exc:
            self.close()
            return Sample.failed(f"the judge worker broke its protocol ({exc})")
        if not reply.get("ok"):
            return Sample.failed(_clean(str(reply.get("error") or "the judge failed")))
        rationale = reply.get("rationale")
        value = reply.get("value")
        if value is not None and not isinstance(value, bool | int | float):
            # Not coerced: "3" is not a score, and "high" must not look like our own error.
            shown = repr(value)[:60]
            return Sample.failed(
                f"the judge returned {type(value).__name__} {shown}; a judge's value is a bool or a number"
            )
        return Sample(value=value, rationale=_clean(rationale if isinstance(rationale, str) else ""))

    def _exchange(self, proc: subprocess.Popen[bytes], request: bytes, deadline: float) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        stdin_fd, stdout_fd = proc.stdin.fileno(), proc.stdout.fileno()
        pending = memoryview(request)
        with selectors.DefaultSelector() as selector:
            selector.register(stdin_fd, selectors.EVENT_WRITE)
            selector.register(stdout_fd, selectors.EVENT_READ)
            while True:
                newline = self._buffer.find(b"\n")
                if newline >= 0:
                    line = bytes(self._buffer[:newline])
                    del self._buffer[: newline + 1]
                    return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Timeout
                for key, _ in selector.select(remaining):
                    if key.fd == stdin_fd:
                        try:
                            written = os.write(stdin_fd, pending[:_CHUNK])
                        except BlockingIOError:
                            continue
                        except (BrokenPipeError, ConnectionResetError):
                            raise _Died from None
                        pending = pending[written:]
                        if not pending:
                            selector.unregister(stdin_fd)
                    else:
                        chunk = os.read(stdout_fd, _CHUNK)
                        if not chunk:
                            raise _Died
                        self._buffer += chunk

    def _death(self, proc: subprocess.Popen[bytes], stderr_mark: int) -> str:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.close()
            return "the judge closed its output and was killed"
        tail = ""
        if self._stderr is not None:
            size = os.fstat(self._stderr.fileno()).st_size
            start = max(stderr_mark, size - _STDERR_TAIL)
            raw = os.pread(self._stderr.fileno(), size - start, start)
            tail = " ".join(raw.decode("utf-8", "replace").split())
        self.close()
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
        return f"the judge process {how}" + (f"; stderr: {tail}" if tail else "")

    def close(self) -> None:
        """Kill the worker's process group and forget it; the next call starts a new one."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._buffer.clear()


class WorkerPool:
    """Idle workers shared by the scoring threads; every worker is killed on close."""

    def __init__(self, cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self._cwd = cwd
        self._env = env
        self._idle: queue.SimpleQueue[JudgeWorker] = queue.SimpleQueue()
        self._all: list[JudgeWorker] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def worker(self) -> Iterator[JudgeWorker]:
        with self._lock:
            if self._closed:
                # A straggling thread after Ctrl-C must not start a process nobody will kill.
                raise RuntimeError("the judge worker pool is closed")
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                worker = JudgeWorker(self._cwd, self._env)
                self._all.append(worker)
        try:
            yield worker
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        for worker in self._all:
            worker.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
