"""The CLI as a user meets it: real console script, real files, exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart" / "eval.yaml"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_validate_quickstart_summary():
    result = cli("validate", str(QUICKSTART))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "OK" in out and "cases:      3" in out and "skill /greeter" in out
    assert "greeted (check)" in out and "mode:       case" in out


def test_validate_defaults_to_eval_yaml_in_cwd(tmp_path):
    shutil.copytree(QUICKSTART.parent, tmp_path / "qs")
    result = cli("validate", cwd=tmp_path / "qs")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        ("execution: {mode: parallel, skill: s}\ndataset: {path: c}\n", "execution.mode must be one of ['case', 'batch']"),
        ("execution: {skill: s, prompt: p}\n", "execution.skill and execution.prompt are mutually exclusive"),
        ("execution: {skill: s}\ndataset: {path: missing}\n", "dataset directory not found"),
        ("execution: [unclosed\n", "invalid YAML at line"),
    ],
)
def test_validate_bad_input_is_one_line_exit_2(tmp_path, yaml_text, needle):
    (tmp_path / "eval.yaml").write_text(yaml_text)
    result = cli("validate", str(tmp_path / "eval.yaml"))
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert str(tmp_path) in errors[0]  # names the file (eval.yaml or the dataset dir)


def test_missing_template_field_at_dry_run(tmp_path):
    (tmp_path / "cases" / "c1").mkdir(parents=True)
    (tmp_path / "cases" / "c1" / "input.yaml").write_text("other: 1\n")
    (tmp_path / "eval.yaml").write_text("execution: {skill: s, arguments: '{prompt}'}\ndataset: {path: cases}\n")
    result = cli("run", str(tmp_path / "eval.yaml"), "--dry-run")
    assert result.returncode == 2
    assert "Missing required field in template: prompt" in result.stderr
    assert "Traceback" not in result.stderr


def test_dry_run_prints_prompt_and_effective_limits():
    result = cli("run", str(QUICKSTART), "--dry-run", "--timeout", "0", "--max-budget", "2.5")
    assert result.returncode == 0, result.stderr
    assert "/greeter Ada" in result.stdout and "/greeter Linus fix-typo" in result.stdout
    assert "timeout: 0s  budget: $2.50" in result.stdout


def test_dry_run_json_defaults(tmp_path):
    (tmp_path / "cases" / "c1").mkdir(parents=True)
    (tmp_path / "cases" / "c1" / "input.yaml").write_text("prompt: hello\n")
    (tmp_path / "eval.yaml").write_text(textwrap.dedent("""
        execution: {prompt: "{{ input.prompt }} world"}
        dataset: {path: cases}
    """))
    result = cli("run", str(tmp_path / "eval.yaml"), "--dry-run", "--json", "--model", "m1")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    inv = report["invocations"][0]
    assert inv["prompt"] == "hello world" and inv["timeout_s"] == 3600 and inv["max_budget_usd"] == 100.0
    assert report["model"] == "m1"


def test_warnings_go_to_stderr_and_do_not_fail(tmp_path):
    (tmp_path / "cases" / "c1").mkdir(parents=True)
    (tmp_path / "cases" / "c1" / "input.yaml").write_text("prompt: hello\n")
    (tmp_path / "eval.yaml").write_text("matrix: {models: [a]}\nexecution: {prompt: '{prompt}'}\ndataset: {path: cases}\n")
    result = cli("validate", str(tmp_path / "eval.yaml"))
    assert result.returncode == 0
    assert "warning:" in result.stderr and "'matrix'" in result.stderr
