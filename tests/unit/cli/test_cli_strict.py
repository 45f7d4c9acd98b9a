"""`validate` and `run` on the broken evals of tests/fixtures/broken_evals, as a user meets them.

Errors (what would break a run) stop `validate`, `run --dry-run` and `run`;
warnings (what would make a run check less than it seems) pass unless
`--strict`. Either way a refusal is exit 2, exactly one `error:` line (the
last line), no traceback, and nothing written.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval_sandbox.cli import cli
from tests.fuzz.checks import snapshot

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "broken_evals"

# fixture -> what its warning or error says (a piece of the one `error:` line)
WARNINGS = {
    "misspelled-judges": "unknown key 'judgs' (did you mean 'judges'?)",
    "duplicate-key": "key 'execution.arguments' is written twice (lines 5 and 6); only the last value counts",
    "threshold-no-judge": "thresholds.summarised names no judge (did you mean 'summarized'?)",
    "missing-input": "no input.yaml; not a case, skipped",
    "zero-judges": "no judges: a run would check nothing",
    "cleared-loader-env": "execution.env.LD_PRELOAD is cleared for the agent's tools while inputs.tools intercepts them",
}
ERRORS = {
    "unknown-skill": "execution.skill: no skill or command '/summariser' in the sandbox (did you mean 'summarizer'?)",
    "template-error": "Missing required field in template: topic",
}
OFFLINE_ERRORS = {
    "script-typo": "case c1: {root}/cases/c1/model_script.yaml: steps[0] (step 1): unknown key 'tol' "
                   "(did you mean 'tool'?)",
}
OFFLINE_WARNINGS = {
    "no-model-script": "--offline: no model_script.yaml for c2",
}


@pytest.fixture
def copy_fixture(tmp_path):
    def copy(name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(FIXTURES / name, root)
        return root

    return copy


def invoke(root: Path, *args: str):
    """The CLI in-process; returns (exit code, stdout, stderr) and checks nothing was written."""
    before = snapshot(root)
    result = CliRunner().invoke(cli, [args[0], str(root / "eval.yaml"), *args[1:]])
    assert snapshot(root) == before
    return result.exit_code, result.stdout, result.stderr


def assert_refused(code: int, stderr: str, needle: str) -> None:
    assert code == 2, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and stderr.rstrip().endswith(errors[0]), stderr
    assert needle in errors[0], errors[0]


def test_the_sound_fixture_passes_everything_strict(copy_fixture):
    root = copy_fixture("sound")
    for args in (("validate", "--strict", "--offline"), ("run", "--dry-run", "--strict", "--offline")):
        code, stdout, stderr = invoke(root, *args)
        assert code == 0, stderr
        assert "warning:" not in stderr and "error:" not in stderr
    assert "checked:    offline scripts: 1 parsed" in invoke(root, "validate", "--offline")[1]


@pytest.mark.parametrize(("name", "needle"), sorted(WARNINGS.items()))
def test_warnings_pass_without_strict(copy_fixture, name, needle):
    code, stdout, stderr = invoke(copy_fixture(name), "validate")
    assert code == 0, stderr
    assert ": OK" in stdout and needle in stderr and "error:" not in stderr


@pytest.mark.parametrize(("name", "needle"), sorted({**WARNINGS, **OFFLINE_WARNINGS}.items()))
@pytest.mark.parametrize("command", [("validate", "--strict", "--offline"), ("run", "--dry-run", "--strict", "--offline"),
                                     ("run", "--strict", "--offline")])
def test_strict_refuses_each_warning(copy_fixture, tmp_path, name, needle, command):
    root = copy_fixture(name)
    runs = tmp_path / "runs"
    extra = ("--runs-dir", str(runs)) if command[0] == "run" else ()
    code, _, stderr = invoke(root, *command, *extra)
    assert_refused(code, stderr, "--strict: ")
    assert needle in stderr
    assert not runs.exists()


@pytest.mark.parametrize(("name", "needle"), sorted(ERRORS.items()))
@pytest.mark.parametrize("command", [("validate",), ("run", "--dry-run"), ("run",)])
def test_errors_stop_validate_and_run(copy_fixture, tmp_path, name, needle, command):
    root = copy_fixture(name)
    runs = tmp_path / "runs"
    code, _, stderr = invoke(root, *command, *(("--runs-dir", str(runs)) if command[0] == "run" else ()))
    assert_refused(code, stderr, needle)
    assert not runs.exists()


def test_a_template_error_names_the_case_input_and_eval_yaml(copy_fixture):
    root = copy_fixture("template-error")
    code, _, stderr = invoke(root, "validate")
    assert_refused(code, stderr, f"{root}/cases/c2/input.yaml: case c2: Missing required field in template: topic "
                                 f"(template: {root}/eval.yaml: execution.arguments)")


@pytest.mark.parametrize(("name", "needle"), sorted(OFFLINE_ERRORS.items()))
def test_script_errors_stop_offline_only(copy_fixture, tmp_path, name, needle):
    root = copy_fixture(name)
    runs = tmp_path / "runs"
    assert invoke(root, "validate")[0] == 0  # online, the scripts play no part
    for command in (("validate", "--offline"), ("run", "--dry-run", "--offline"),
                    ("run", "--offline", "--runs-dir", str(runs))):
        code, _, stderr = invoke(root, *command)
        assert_refused(code, stderr, needle.format(root=root))
    assert not runs.exists()


def test_a_strict_refusal_from_the_real_console_script(copy_fixture, tmp_path):
    """The same as a user sees it: a real process, its stderr, its exit code."""
    root = copy_fixture("misspelled-judges")
    runs = tmp_path / "runs"
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(root / "eval.yaml"), "--strict", "--offline",
         "--runs-dir", str(runs)],
        capture_output=True, text=True, timeout=120,
    )
    assert_refused(process.returncode, process.stderr,
                   f"--strict: 3 warnings, the first: {root}/eval.yaml: unknown key 'judgs' (did you mean 'judges'?)")
    assert "no judges: a run would check nothing" in process.stderr
    assert "thresholds.summarized names no judge" in process.stderr
    assert process.stdout == "" and not runs.exists()


def test_the_quickstart_is_clean_under_strict():
    quickstart = Path(__file__).resolve().parents[3] / "examples" / "quickstart"
    code, stdout, stderr = invoke(quickstart, "validate", "--strict", "--offline")
    assert code == 0, stderr
    assert stderr == "" and "checked:    skill /greeter: .claude/skills/greeter/SKILL.md" in stdout
