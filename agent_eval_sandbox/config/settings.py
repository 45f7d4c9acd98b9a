"""Effective run settings: CLI flags over eval.yaml over the reference defaults.

The config keeps `timeout`, `max_budget_usd` and `parallelism` as None when
unset; they become 3600 s / $100 / 1 only here, at run time. Checks are
explicit `is None` tests so a deliberate 0 is honoured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from agent_eval_sandbox.config.models import (
    DEFAULT_MAX_BUDGET_USD,
    DEFAULT_PARALLELISM,
    DEFAULT_TIMEOUT_S,
    EvalConfig,
)
from agent_eval_sandbox.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class CliOverrides:
    timeout: int | None = None
    max_budget: float | None = None
    parallelism: int | None = None
    skill_args: str | None = None
    model: str | None = None
    subagent_model: str | None = None


@dataclass(frozen=True)
class RunSettings:
    timeout_s: int
    max_budget_usd: float
    parallelism: int
    model: str | None
    subagent_model: str | None
    template: str  # execution.arguments (skill mode) or execution.prompt (prompt mode)
    template_source: str = "execution.arguments"  # where `template` came from, for error messages
    # Agent judges' sandboxes at once: the parallelism asked for, without the caps that apply to cases.
    judge_sandboxes: int = 1


def _first_set(*values: T | None, default: T) -> T:
    """The first value that is not None, else `default`."""
    for value in values:
        if value is not None:
            return value
    return default


def resolve_run_settings(config: EvalConfig, cli: CliOverrides, *, num_cases: int | None = None) -> RunSettings:
    execution = config.execution
    timeout = _first_set(cli.timeout, execution.timeout, default=DEFAULT_TIMEOUT_S)
    budget = _first_set(cli.max_budget, execution.max_budget_usd, default=DEFAULT_MAX_BUDGET_USD)
    parallelism = _first_set(cli.parallelism, execution.parallelism, default=DEFAULT_PARALLELISM)
    judge_sandboxes = max(1, parallelism)
    if config.is_batch or config.is_repo_mode:
        # One invocation (batch) or one shared checkout (repo): nothing may run side by side.
        parallelism = min(parallelism, 1)
    elif num_cases is not None and parallelism > num_cases:
        parallelism = max(num_cases, 1)
    model = _first_set(cli.model, default=config.models.skill)
    subagent = _first_set(cli.subagent_model, config.models.subagent, default=model)
    default_template = execution.arguments if execution.skill else execution.prompt
    template = _first_set(cli.skill_args, default=default_template) or ""
    source = "--skill-args" if cli.skill_args is not None else (
        "execution.arguments" if execution.skill else "execution.prompt")
    return RunSettings(
        timeout_s=int(timeout),
        max_budget_usd=float(budget),
        parallelism=int(parallelism),
        model=model,
        subagent_model=subagent,
        template=template,
        template_source=source,
        judge_sandboxes=judge_sandboxes,
    )


def require_runnable(config: EvalConfig, settings: RunSettings, *, config_path: str) -> None:
    """The checks `run` needs beyond a valid config (a dry run reports instead)."""
    if config.execution.steps:
        return  # each step runs its own skill or prompt (config/models.StepConfig checks one is set)
    if not config.execution.skill and not config.execution.prompt:
        raise ConfigError(
            "nothing to run: neither execution.skill nor execution.prompt is set",
            file=config_path,
            fix="set execution.skill (with arguments) or execution.prompt",
        )
    if config.runner.type != "claude-code":
        raise ConfigError(
            f"runner.type '{config.runner.type}' is not supported: agent-eval-sandbox runs the "
            "Claude Code CLI inside the sandbox",
            file=config_path,
            fix="set runner.type: claude-code (or remove it)",
        )
    if not settings.model:
        raise ConfigError(
            "no model specified",
            file=config_path,
            fix="Set --model or models.skill in eval.yaml.",
        )
    if settings.parallelism < 1:
        raise ConfigError(
            f"parallelism is {settings.parallelism}: no case could run",
            file=config_path,
            fix="set execution.parallelism (or --parallelism) to 1 or more",
        )
