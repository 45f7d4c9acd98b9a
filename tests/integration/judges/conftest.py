"""Fixtures for judge integration tests: real worker processes, the scripted model server, Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import parse_script
from agent_eval_sandbox.model_api import RetryPolicy

FAST_RETRY = RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.02)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "chromium: needs the chromium browser (apt-get install -y chromium); CI installs it, so it never skips there",
    )


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ScriptedModelServer]]:
    """Start a scripted model server for `steps` and point the anthropic SDK at it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("EVAL_JUDGE_MODEL", raising=False)
    with ExitStack() as stack:

        def start(steps: list[dict[str, Any]], advance: str = "per_request") -> ScriptedModelServer:
            server = stack.enter_context(ScriptedModelServer(parse_script({"advance": advance, "steps": steps})))
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
            return server

        yield start


@pytest.fixture(scope="session")
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if path is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (CI installs it; this test must not skip)")
    return path
