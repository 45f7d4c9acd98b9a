"""Real components for interception tests: brokers on real sockets, the real hook client, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

import agent_eval_sandbox.inside.hook_client as hook_client_module
from agent_eval_sandbox.gateway import ScriptedModelServer, ServedRequest
from agent_eval_sandbox.interception.broker import (
    Broker,
    BrokerLimits,
    TimedAnswerer,
)
from agent_eval_sandbox.interception.decision import CaseContext
from agent_eval_sandbox.interception.handlers import ToolHandlers, parse_handlers
from agent_eval_sandbox.sandbox.claude_binary import ensure_claude_binary
from tests.integration.claude_on_host import host_claude_argv, host_claude_env

HOOK_CLIENT = Path(hook_client_module.__file__)
PYTHON = "/usr/bin/python3"  # the interpreter the hook entry names, as in the image


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory for unix sockets (pytest's tmp paths can pass the 107-byte limit)."""
    path = Path(tempfile.mkdtemp(prefix="aes-ic-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def served(model: ScriptedModelServer, count: int) -> list[ServedRequest]:
    """The model server's requests once `count` are recorded (it records each after answering it)."""
    deadline = time.monotonic() + 5
    while len(model.requests) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return model.requests


def handlers_of(*entries: dict[str, Any], **top: Any) -> ToolHandlers:
    return parse_handlers({"handlers": list(entries), **top}, "tool_handlers.yaml")


@dataclass
class BrokerHarness:
    broker: Broker
    warnings: list[str] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        return self.broker.socket_path

    def records(self) -> list[dict[str, Any]]:
        path = self.broker.log_path
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def start_broker(sock_dir: Path, tmp_path: Path) -> Iterator[Callable[..., BrokerHarness]]:
    """Start a real broker; every one is closed at the end of the test."""
    started: list[Broker] = []

    def start(
        handlers: ToolHandlers,
        *,
        env: dict[str, str] | None = None,
        case: CaseContext | None = None,
        answerer: TimedAnswerer | None = None,
        limits: BrokerLimits | None = None,
        name: str = "broker.sock",
    ) -> BrokerHarness:
        harness_warnings: list[str] = []
        broker = Broker(
            "case-1",
            sock_dir / name,
            handlers,
            case or CaseContext((("input.yaml", "title: Fix the login bug\n"),)),
            env or {},
            tmp_path / "cases" / "case-1" / "tool_decisions.jsonl",
            answerer=answerer,
            warn=harness_warnings.append,
            limits=limits,
        ).start()
        started.append(broker)
        return BrokerHarness(broker, harness_warnings)

    yield start
    for broker in started:
        broker.close()


@dataclass
class ClientRun:
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    @property
    def output(self) -> dict[str, Any] | None:
        return json.loads(self.stdout) if self.stdout.strip() else None

    @property
    def permission(self) -> str | None:
        output = self.output
        return output["hookSpecificOutput"]["permissionDecision"] if output else None


def client_command(socket_path: Path, timeout: float | None = None) -> list[str]:
    command = [PYTHON, "-I", str(HOOK_CLIENT), "--socket", str(socket_path)]
    return command + (["--timeout", str(timeout)] if timeout is not None else [])


def run_client(socket_path: Path, event: dict[str, Any] | bytes, *, timeout: float | None = None) -> ClientRun:
    """The hook client as Claude Code runs it: the event on stdin, the decision on stdout."""
    payload = event if isinstance(event, bytes) else json.dumps(event).encode()
    started = time.monotonic()
    proc = subprocess.run(client_command(socket_path, timeout), input=payload, capture_output=True, timeout=60)
    return ClientRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), time.monotonic() - started)


def pre_tool_use(tool_name: str, tool_input: dict[str, Any], tool_use_id: str = "toolu_01") -> dict[str, Any]:
    return {
        "session_id": "s-1",
        "transcript_path": "/home/agent/.claude/projects/-workspace/s-1.jsonl",
        "cwd": "/workspace",
        "permission_mode": "bypassPermissions",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": tool_use_id,
    }


@pytest.fixture
def write_script(tmp_path: Path) -> Callable[..., Path]:
    def write(data: Any, name: str = "script.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@dataclass
class ClaudeRun:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    cwd: Path

    @property
    def result(self) -> dict[str, Any]:
        results = [e for e in self.events if e.get("type") == "result"]
        assert results, f"no result event; stderr: {self.stderr[-2000:]}"
        return results[-1]

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            block
            for event in self.events
            if event.get("type") == "user" and isinstance(event.get("message", {}).get("content"), list)
            for block in event["message"]["content"]
            if block.get("type") == "tool_result"
        ]

    def tool_result_text(self, index: int) -> str:
        content = self.tool_results()[index]["content"]
        return content if isinstance(content, str) else json.dumps(content)


@pytest.fixture(scope="session")
def claude_path() -> Path:
    return ensure_claude_binary().path


@pytest.fixture
def run_claude(claude_path: Path, tmp_path: Path) -> Callable[..., ClaudeRun]:
    """`claude -p` on the host against a scripted model, with extra flags (our hooks)."""

    def run(base_url: str, flags: list[str], *, env: dict[str, str] | None = None, timeout: float = 120) -> ClaudeRun:
        cwd = Path(os.path.realpath(tmp_path / "workspace"))
        home = tmp_path / "home"
        cwd.mkdir(exist_ok=True)
        home.mkdir(exist_ok=True)
        process_env = {**host_claude_env(base_url, str(home), max_retries=1), **(env or {})}
        argv = host_claude_argv(str(claude_path), *flags)
        proc = subprocess.run(
            argv, input="Do the task.", capture_output=True, text=True, cwd=cwd, env=process_env, timeout=timeout,
            check=False,
        )
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        return ClaudeRun(proc.returncode, events, proc.stderr, cwd)

    return run
