"""Fixtures for gateway integration tests: the real claude CLI, the forwarder, scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import agent_eval_sandbox.inside.forwarder as forwarder_module
from agent_eval_sandbox.sandbox.claude_binary import ensure_claude_binary
from tests.integration.claude_on_host import host_claude_argv, host_claude_env

FORWARDER = Path(forwarder_module.__file__)


@dataclass
class ClaudeRun:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    elapsed_s: float
    cwd: Path
    env: dict[str, str]

    @property
    def result(self) -> dict[str, Any]:
        results = [e for e in self.events if e.get("type") == "result"]
        assert results, f"no result event; stderr: {self.stderr[-2000:]}"
        return results[-1]


@pytest.fixture(scope="session")
def claude_path() -> Path:
    return ensure_claude_binary().path


@pytest.fixture
def run_claude(claude_path: Path, tmp_path: Path) -> Callable[..., ClaudeRun]:
    """Run `claude -p` as the sandbox does, against `base_url`, in a fresh cwd and HOME."""

    def run(base_url: str, prompt: str = "Do the task.", timeout: float = 120) -> ClaudeRun:
        cwd = Path(os.path.realpath(tmp_path / "workspace"))
        home = tmp_path / "home"
        cwd.mkdir(exist_ok=True)
        home.mkdir(exist_ok=True)
        env = host_claude_env(base_url, str(home))
        started = time.monotonic()
        proc = subprocess.run(
            host_claude_argv(str(claude_path)),
            input=prompt,
            check=False,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
        )
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        return ClaudeRun(proc.returncode, events, proc.stderr, time.monotonic() - started, cwd, env)

    return run


@pytest.fixture
def start_forwarder(tmp_path: Path) -> Iterator[Callable[[Path], str]]:
    """Start forwarder.py (as the container does) for a socket; returns its base URL."""
    procs: list[subprocess.Popen[str]] = []

    def start(socket_path: Path) -> str:
        ready = tmp_path / f"forwarder-{len(procs)}.ready"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                str(FORWARDER),
                "--listen",
                "127.0.0.1:0",
                "--unix",
                str(socket_path),
                "--ready-file",
                str(ready),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on" in line, line
        return f"http://{ready.read_text().strip()}"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.fixture
def write_script(tmp_path: Path) -> Callable[[Any], Path]:
    def write(data: Any, name: str = "script.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data))
        return path

    return write


@pytest.fixture
def read_log() -> Callable[[Path], list[dict[str, Any]]]:
    """The records of a gateway request log."""
    return lambda path: [json.loads(line) for line in path.read_text().splitlines()]
