"""A runtime that is not registered with Docker is one clear error, before anything starts."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.docker_objects import objects_of_run
from tests.integration.e2e.conftest import EvalProject

from .conftest import bash, final

pytestmark = pytest.mark.docker


def test_an_unregistered_runtime_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    project = EvalProject(tmp_path / "project")
    name = f"no-such-runtime-{secrets.token_hex(3)}"
    project.eval_yaml(f"""
        name: attack-runtime
        execution: {{prompt: "{{q}}", timeout: 60}}
        models: {{skill: claude-sonnet-4-6}}
        dataset: {{path: cases}}
        sandbox: {{runtime: {name}}}
        judges: [{{name: said_hi, check: "outputs['exit_code'] == 0"}}]
    """)
    project.case("c1", {"q": "hello"}, script=[bash("echo hi"), final()])
    run_id = f"atk-runtime-{secrets.token_hex(3)}"
    result = project.run("--offline", "--run-id", run_id)
    assert result.process.returncode == 2
    lines = result.process.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: container runtime") and repr(name) in lines[0]
    assert "runsc install" in lines[0] and "runc" in lines[0]  # what is registered, and the fix
    # No run directory (the runs directory itself may exist: where a controller in a container shares files).
    assert result.run_dir is None and not list(project.runs.glob("*/*"))
    assert objects_of_run(run_id) == []
