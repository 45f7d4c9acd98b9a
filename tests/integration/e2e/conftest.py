"""End-to-end helpers: a throwaway eval project, the real CLI, the real sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml


@dataclass
class RunResult:
    process: subprocess.CompletedProcess[str]
    run_dir: Path | None

    def case(self, case_id: str) -> Path:
        assert self.run_dir is not None, self.process.stderr
        return self.run_dir / "cases" / case_id

    def case_result(self, case_id: str) -> dict[str, Any]:
        return json.loads((self.case(case_id) / "run_result.json").read_text())

    def events(self, case_id: str) -> list[dict[str, Any]]:
        return json.loads((self.case(case_id) / "events.json").read_text())

    def tool_results(self, case_id: str) -> list[str]:
        return [e["content"] for e in self.events(case_id) if e["type"] == "tool_result"]


class EvalProject:
    """Writes eval.yaml, cases and model scripts under a temp dir and runs them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = root / "runs"

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def eval_yaml(self, text: str) -> Path:
        return self.write("eval.yaml", text)

    def case(self, case_id: str, input_data: dict[str, Any], script: list[dict[str, Any]] | None = None,
             files: dict[str, str] | None = None) -> Path:
        case_dir = self.root / "cases" / case_id
        case_dir.mkdir(parents=True, exist_ok=True)
        (case_dir / "input.yaml").write_text(yaml.safe_dump(input_data))
        if script is not None:
            (case_dir / "model_script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
        for name, content in (files or {}).items():
            target = case_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        return case_dir

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600,
            wrapper: tuple[str, ...] = ()) -> RunResult:
        """`wrapper` goes before the command (e.g. `prlimit --nofile=1024:1024 --`)."""
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        full_env.update(env or {})
        process = subprocess.run(
            [*wrapper, sys.executable, "-m", "agent_eval_sandbox", "run", str(self.root / "eval.yaml"),
             "--runs-dir", str(self.runs), "--json", *args],
            capture_output=True, text=True, timeout=timeout, env=full_env, cwd=self.root,
        )
        run_dir = None
        if process.stdout.strip().startswith("{"):
            run_dir = Path(json.loads(process.stdout)["run_dir"])
        return RunResult(process, run_dir)


@pytest.fixture
def project(tmp_path: Path) -> EvalProject:
    return EvalProject(tmp_path / "project")
