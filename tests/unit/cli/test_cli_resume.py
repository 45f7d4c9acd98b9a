"""`run --resume` on the command line: the run's own settings come from run.json, the machine's from the
resume's command line, and options that would change the run are refused (no Docker: `_execute` is caught)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval_sandbox import cli as cli_module
from agent_eval_sandbox.app.rerun import fingerprint
from agent_eval_sandbox.app.scaffold import write_scaffold
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.rundir.layout import RunDir


def _interrupted_run(tmp_path: Path) -> tuple[Path, RunDir]:
    project = tmp_path / "p"
    write_scaffold(project, schema_text="{}")
    loaded = load_eval_config(project / "eval.yaml")
    run = RunDir.create(tmp_path / "runs", loaded.config.name, "r1")
    run.run_json.write_text(json.dumps({
        "run_id": "r1", "config_path": str(loaded.path), "offline": True, "fingerprint": fingerprint(loaded),
        "claude_version": "9.9.9", "epochs": 1,
        "settings": {"timeout_s": 77, "max_budget_usd": 0.5, "parallelism": 1, "model": "m-started",
                     "subagent_model": "m-sub", "skill_args": "started args"},
    }))
    run.run_result.write_text(json.dumps({"interrupted": True, "per_case": {
        "001-shopping": {"case_id": "001-shopping", "cases": ["001-shopping"], "end_reason": "exited",
                         "exit_code": 0, "agent_duration_s": 1.0},
        "002-reading": {"case_id": "002-reading", "cases": ["002-reading"], "end_reason": "interrupted"},
    }}))
    return project, run


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake_execute(loaded: Any, dataset: Any, settings: Any, invocations: Any, **kwargs: Any) -> None:
        calls.append({"settings": settings, "invocations": [inv.id for inv in invocations], **kwargs})

    monkeypatch.setattr(cli_module, "_execute", fake_execute)
    return calls


def test_resume_takes_the_run_from_run_json_and_the_machine_from_its_command_line(tmp_path, executed):
    project, run = _interrupted_run(tmp_path)
    shared = tmp_path / "shared"
    result = CliRunner().invoke(cli_module.cli, [
        "run", "--resume", str(run.root), "--shared-dir", str(shared), "--allow-unenforced-network",
        "--parallelism", "3", "--rebuild-image"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (call,) = executed
    assert call["shared_dir"] == shared and call["allow_unenforced_network"] is True
    assert call["rebuild_image"] is True and call["claude_version"] == "9.9.9"
    assert call["offline"] is True and call["run_id"] == "r1" and call["resume"].run.root == run.root
    assert call["invocations"] == ["002-reading"]
    settings = call["settings"]
    assert (settings.timeout_s, settings.max_budget_usd, settings.model) == (77, 0.5, "m-started")
    assert (settings.subagent_model, settings.template) == ("m-sub", "started args")
    assert settings.parallelism == 1  # asked for 3, capped by the one case left to run


def test_without_host_flags_a_resume_uses_the_defaults(tmp_path, executed):
    _, run = _interrupted_run(tmp_path)
    result = CliRunner().invoke(cli_module.cli, ["run", "--resume", str(run.root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert executed[0]["shared_dir"] is None and executed[0]["allow_unenforced_network"] is False


@pytest.mark.parametrize("extra, named", [
    (["--model", "other"], "--model"), (["--timeout", "5"], "--timeout"), (["--max-budget", "1"], "--max-budget"),
    (["--skill-args", "x"], "--skill-args"), (["--case", "001*"], "--case"), (["--epochs", "2"], "--epochs"),
    (["--subagent-model", "s"], "--subagent-model"), (["--run-id", "r2"], "--run-id"),
    (["--claude-version", "1.0.0"], "Claude Code 9.9.9"),
])
def test_options_that_would_change_the_run_are_refused_in_one_line(tmp_path, executed, extra, named):
    _, run = _interrupted_run(tmp_path)
    result = CliRunner().invoke(cli_module.cli, ["run", "--resume", str(run.root), *extra])
    assert result.exit_code == 2 and not executed
    (line,) = result.output.splitlines()
    assert line.startswith("error: ") and named in line


def test_offline_on_the_resume_of_an_offline_run_is_no_conflict(tmp_path, executed):
    _, run = _interrupted_run(tmp_path)
    assert CliRunner().invoke(cli_module.cli, ["run", "--offline", "--resume", str(run.root)]).exit_code == 0
    meta = json.loads(run.run_json.read_text())
    run.run_json.write_text(json.dumps({**meta, "offline": False}))
    refused = CliRunner().invoke(cli_module.cli, ["run", "--offline", "--resume", str(run.root)])
    assert refused.exit_code == 2 and "not started --offline" in refused.output
