"""Which models and server tools a run's gateway allows, from eval.yaml, the run settings and the host."""

from __future__ import annotations

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.runner.agent_command import gateway_models, gateway_policy


def _config(**blocks: object) -> EvalConfig:
    return EvalConfig.model_validate({"execution": {"prompt": "hi"}, "models": {"skill": "claude-sonnet-4-6"},
                                      **blocks})


def test_the_skill_and_subagent_models_and_the_clis_haiku_are_allowed():
    config = _config(models={"skill": "claude-sonnet-4-6", "subagent": "claude-opus-4-6"})
    policy = gateway_policy(config, resolve_run_settings(config, CliOverrides()), {})
    assert policy.models.names == {"claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5"}
    assert policy.server_tools == frozenset() and policy.max_tokens_ceiling == 128_000
    assert not policy.models.allows("claude-opus-4-5")


def test_a_cli_model_override_is_what_is_allowed():
    config = _config()
    policy = gateway_policy(config, resolve_run_settings(config, CliOverrides(model="opus")), {})
    assert policy.models.allows("claude-opus-5-5") and not policy.models.allows("claude-sonnet-4-6")


def test_model_variables_of_the_host_and_the_config_and_the_gateway_block_add_models():
    config = _config(runner={"env": {"ANTHROPIC_SMALL_FAST_MODEL": "claude-3-5-haiku-20241022"}},
                     execution={"prompt": "hi", "env": {"ANTHROPIC_DEFAULT_OPUS_MODEL": "$OPUS"}},
                     sandbox={"gateway": {"models": ["claude-fable-5"], "server_tools": ["web_fetch"],
                                          "max_tokens": 32000}})
    host = {"ANTHROPIC_DEFAULT_HAIKU_MODEL": "claude-haiku-5-5", "OPUS": "claude-opus-4-1", "OTHER": "claude-x"}
    settings = resolve_run_settings(config, CliOverrides())
    models = gateway_models(config, settings, host)
    assert set(models) == {"claude-sonnet-4-6", "claude-haiku-4-5", "claude-haiku-5-5", "claude-3-5-haiku-20241022",
                           "claude-opus-4-1", "claude-fable-5"}
    policy = gateway_policy(config, settings, host)
    assert policy.server_tools == frozenset({"web_fetch"}) and policy.max_tokens_ceiling == 32000
