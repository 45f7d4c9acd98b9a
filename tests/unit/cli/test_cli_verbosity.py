"""-v/--verbose and -q/--quiet: on every command, one setting, and what each lets through (no Docker)."""

from __future__ import annotations

import logging
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent_eval_sandbox import verbosity
from agent_eval_sandbox.app.scaffold import write_scaffold
from agent_eval_sandbox.cli import cli
from agent_eval_sandbox.report.summary import Summary
from agent_eval_sandbox.report.text import verdict_line


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append(((*prefix, name), command))
        if isinstance(command, click.Group):
            found += _commands(command, (*prefix, name))
    return found


@pytest.mark.parametrize("path, command", _commands(cli), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_has_verbose_and_quiet(path, command):
    names = {opt for param in command.params for opt in getattr(param, "opts", [])}
    assert {"-v", "--verbose", "-q", "--quiet"} <= names, path
    shown = CliRunner().invoke(cli, [*path, "--help"])
    assert "--verbose" in shown.output and "--quiet" in shown.output


def test_verbose_and_quiet_together_are_a_usage_error():
    result = CliRunner().invoke(cli, ["-v", "schema", "-q"])
    assert result.exit_code == 2 and "exclusive" in result.output


def _logged(args: list[str]) -> str:
    @cli.command("say-for-test")
    def say() -> None:
        logger = logging.getLogger("agent_eval_sandbox.test")
        logger.debug("a detail")
        logger.info("a step")
        logger.error("a failure")
        verbosity.err_console().print("a console line")

    try:
        verbosity.add_options(say)
        # args[0] goes before the command name (on the group), the rest after it; "" is no option.
        line = [*args[:1], "say-for-test", *args[1:]]
        return CliRunner().invoke(cli, [a for a in line if a], catch_exceptions=False).output
    finally:
        del cli.commands["say-for-test"]


@pytest.mark.parametrize("args, shown, hidden", [
    ([], ["a step", "error: a failure", "a console line"], ["a detail"]),
    (["-v"], ["debug: a detail", "a step", "error: a failure", "a console line"], []),
    (["--verbose"], ["debug: a detail"], []),
    (["-q"], ["error: a failure"], ["a detail", "a step", "a console line"]),
    (["", "--quiet"], ["error: a failure"], ["a step", "a console line"]),  # after the command name too
])
def test_each_level_lets_through_what_it_says(args, shown, hidden):
    output = _logged(args)
    for line in shown:
        assert line in output, output
    for line in hidden:
        assert line not in output, output


def test_one_invocation_does_not_leave_its_level_to_the_next():
    assert "a detail" in _logged(["-v"])
    assert "a detail" not in _logged([])


def test_quiet_warnings_are_held_back_but_errors_are_not(tmp_path: Path):
    write_scaffold(tmp_path, schema_text="{}")
    eval_yaml = tmp_path / "eval.yaml"
    eval_yaml.write_text(eval_yaml.read_text() + "\nnot_a_key: 1\n")
    loud = CliRunner().invoke(cli, ["validate", str(eval_yaml)])
    assert "warning:" in loud.output
    hushed = CliRunner().invoke(cli, ["validate", "-q", str(eval_yaml)])
    assert "warning:" not in hushed.output and "OK" in hushed.output
    missing = CliRunner().invoke(cli, ["validate", "-q", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and missing.output.startswith("error:")


def test_the_verdict_line_names_the_verdict_the_cases_and_the_exit_code():
    summary = Summary.model_validate({"eval": "e", "run_id": "r1", "scored_at": "now", "per_case": {},
                                      "judges": {}, "thresholds": {"checks": [], "config": {}, "passed": True}})
    assert verdict_line(summary, 0).startswith("PASS: e run r1:")
    assert verdict_line(summary, 0).endswith("0 regression(s) (exit 0)")
    assert verdict_line(summary, 4).startswith("INFRASTRUCTURE ERROR:")
