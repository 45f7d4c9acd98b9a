"""CLI behaviour for the controller image's uses (no Docker needed: these fail before any daemon is asked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart" / "eval.yaml"


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_eval_sandbox", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=cwd, timeout=120)


@pytest.mark.parametrize("docker_host", ["tcp://build-host.invalid:2376", "ssh://ci@build-host.invalid"])
def test_a_remote_daemon_is_refused_at_start_with_one_line(docker_host, tmp_path):
    """`.invalid` never resolves: an attempt to reach it would end in another error than this one."""
    result = cli("run", str(QUICKSTART), "--offline", "--runs-dir", str(tmp_path / "runs"),
                 env={"DOCKER_HOST": docker_host}, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: DOCKER_HOST={docker_host} is a daemon on another machine")
    assert "unix sockets" in lines[0] and "/var/run/docker.sock" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing was started, not even a run directory


def test_tag_is_for_the_controller_image_only(tmp_path):
    result = cli("image", "build", "--tag", "x:y", env={}, cwd=tmp_path)
    assert result.returncode == 2 and "--tag applies to --controller only" in result.stderr
