from __future__ import annotations

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.settings import (
    CliOverrides,
    require_runnable,
    resolve_run_settings,
)
from agent_eval_sandbox.errors import ConfigError


def _config(write_eval, text):
    return load_eval_config(write_eval(text)).config


def test_defaults_apply_only_at_run_time(write_eval):
    s = resolve_run_settings(_config(write_eval, "execution: {skill: s}\n"), CliOverrides())
    assert (s.timeout_s, s.max_budget_usd, s.parallelism) == (3600, 100.0, 1)


def test_explicit_zero_honoured(write_eval):
    s = resolve_run_settings(_config(write_eval, "execution: {skill: s, timeout: 0, max_budget_usd: 0}\n"), CliOverrides())
    assert s.timeout_s == 0 and s.max_budget_usd == 0.0


def test_cli_overrides_config(write_eval):
    config = _config(write_eval, """
        execution: {skill: s, arguments: "{prompt}", timeout: 10, max_budget_usd: 2, parallelism: 2}
        models: {skill: m-config}
    """)
    s = resolve_run_settings(config, CliOverrides(timeout=0, max_budget=0.5, parallelism=3, skill_args="--x {y}", model="m-cli"))
    assert s.timeout_s == 0 and s.max_budget_usd == 0.5 and s.parallelism == 3
    assert s.template == "--x {y}" and s.model == "m-cli"


def test_config_used_when_no_flag(write_eval):
    config = _config(write_eval, "execution: {prompt: 'P {q}', timeout: 10, parallelism: 2}\nmodels: {skill: m}\n")
    s = resolve_run_settings(config, CliOverrides())
    assert s.template == "P {q}" and s.timeout_s == 10 and s.parallelism == 2 and s.model == "m"


def test_subagent_falls_back_to_skill_model(write_eval):
    s = resolve_run_settings(_config(write_eval, "models: {skill: big}\n"), CliOverrides())
    assert s.subagent_model == "big"


def test_parallelism_capped_by_cases_and_forced_in_batch_and_repo(write_eval):
    assert resolve_run_settings(_config(write_eval, "execution: {skill: s, parallelism: 8}\n"), CliOverrides(), num_cases=3).parallelism == 3
    assert resolve_run_settings(_config(write_eval, "execution: {mode: batch, skill: s, parallelism: 8}\n"), CliOverrides()).parallelism == 1
    assert resolve_run_settings(_config(write_eval, "execution: {prompt: p, parallelism: 8}\nrunner: {workspace_mode: repo}\n"), CliOverrides()).parallelism == 1


def test_model_required_to_run(write_eval):
    config = _config(write_eval, "execution: {skill: s}\n")
    with pytest.raises(ConfigError, match="no model specified") as info:
        require_runnable(config, resolve_run_settings(config, CliOverrides()), config_path="eval.yaml")
    assert "Set --model or models.skill in eval.yaml." in str(info.value)


def test_unsupported_runner_refused_at_run(write_eval):
    config = _config(write_eval, "execution: {skill: s}\nrunner: {type: cli, command: x}\nmodels: {skill: m}\n")
    with pytest.raises(ConfigError, match="runner.type 'cli' is not supported"):
        require_runnable(config, resolve_run_settings(config, CliOverrides()), config_path="eval.yaml")


def test_parallelism_zero_refused_at_run(write_eval):
    config = _config(write_eval, "execution: {skill: s, parallelism: 0}\nmodels: {skill: m}\n")
    with pytest.raises(ConfigError, match="parallelism is 0"):
        require_runnable(config, resolve_run_settings(config, CliOverrides()), config_path="eval.yaml")


def test_nothing_to_run(write_eval):
    config = _config(write_eval, "models: {skill: m}\n")
    with pytest.raises(ConfigError, match="neither execution.skill nor execution.prompt"):
        require_runnable(config, resolve_run_settings(config, CliOverrides()), config_path="eval.yaml")


def test_a_pipeline_is_runnable_without_a_top_level_skill_or_prompt(write_eval):
    config = _config(write_eval, "models: {skill: m}\nexecution: {steps: [{id: a, skill: s}]}\n")
    require_runnable(config, resolve_run_settings(config, CliOverrides()), config_path="eval.yaml")
