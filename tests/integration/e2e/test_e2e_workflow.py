"""The everyday loop on real runs (real Docker, the real CLI, scripted models): init, selection,
latest, runs, show, rerun-failed, resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.docker


def cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENT_EVAL_RUNS_DIR"))}
    return subprocess.run([sys.executable, "-m", "agent_eval_sandbox", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def test_init_then_run_offline_passes(tmp_path: Path) -> None:
    made = cli("init", "starter", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    root = tmp_path / "starter"
    ran = cli("run", "--offline", "--json", cwd=root)
    assert ran.returncode == 0, ran.stderr
    run_dir = root / json.loads(ran.stdout)["run_dir"]
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    assert summary["thresholds"]["passed"] is True
    assert sorted(summary["per_case"]) == ["001-shopping", "002-reading"]
    for verdicts in summary["per_case"].values():
        assert all(v["value"] is True for v in verdicts.values()), verdicts
    again = cli("init", "starter", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "exists already" in again.stderr
