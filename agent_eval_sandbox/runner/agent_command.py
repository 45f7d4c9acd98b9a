"""The agent's command line and environment inside the sandbox (pure).

The flag set follows the reference claude-code runner: `--print --model M
--output-format stream-json --verbose`, the budget, effort, permission mode,
plugin dirs, appended system prompt, and the permission/interception flags.
The environment is an allowlist: the host's credentials never enter it; the
CLI reaches the model through the in-container forwarder to the host gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent_eval_sandbox.config.env import resolve_env
from agent_eval_sandbox.config.models import EvalConfig, RunnerConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.gateway.credentials import PLACEHOLDER_API_KEY
from agent_eval_sandbox.gateway.policy import (
    DEFAULT_SMALL_MODELS,
    GatewayPolicy,
    ModelAllowlist,
)
from agent_eval_sandbox.inside import paths

# Execute-only on the host's kernel (a non-dumpable process from its first instruction); -I keeps
# PYTHON* variables of the agent's environment from changing what the launcher runs; -S skips
# `site` (the launcher needs the standard library alone), ~2 ms of each case's CPU.
LAUNCHER_INTERPRETER = paths.PROTECTED_INTERPRETER

# Set by the host itself; a config or hook may not override them inside the sandbox.
MANAGED_KEYS = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_UNIX_SOCKET",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_BEDROCK",
        "HOME",
    }
)
# Host variables worth forwarding: model aliases and CLI knobs, never credentials.
FORWARDED_FROM_HOST = (
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
)


def claude_argv(
    config: EvalConfig,
    settings: RunSettings,
    *,
    plugin_dirs: list[str],
    extra_flags: list[str],
) -> list[str]:
    runner = config.runner
    argv = ["claude", "--print", "--model", settings.model or "", "--output-format", "stream-json", "--verbose"]
    # The CLI rejects a 0 cap; a $0 budget is enforced by the gateway refusing every request.
    if settings.max_budget_usd > 0:
        argv += ["--max-budget-usd", f"{settings.max_budget_usd:g}"]
    if runner.effort:
        argv += ["--effort", runner.effort]
    if runner.permission_mode:
        argv += ["--permission-mode", runner.permission_mode]
    for plugin in plugin_dirs:
        argv += ["--plugin-dir", plugin]
    if runner.system_prompt:
        argv += ["--append-system-prompt", runner.system_prompt]
    return argv + list(extra_flags)


def judge_claude_argv(runner: RunnerConfig, *, model: str, budget_usd: float, allowed_tools: list[str]) -> list[str]:
    """An agent judge's `claude -p`: its model and budget, its own runner's effort, permission mode and
    system prompt, and its `allowed_tools` (pre-approved, as the reference's permissions.allow)."""
    argv = ["claude", "--print", "--model", model, "--output-format", "stream-json", "--verbose"]
    if budget_usd > 0:
        argv += ["--max-budget-usd", f"{budget_usd:g}"]
    if runner.effort:
        argv += ["--effort", runner.effort]
    if runner.permission_mode:
        argv += ["--permission-mode", runner.permission_mode]
    if runner.system_prompt:
        argv += ["--append-system-prompt", runner.system_prompt]
    if allowed_tools:
        argv += ["--allowed-tools", ",".join(allowed_tools)]
    return argv


# A pipeline's steps are sent their prompts on the exec's stdin: the channel directory is
# copied into the sandbox once where the backend cannot bind-mount it (Kubernetes), and a
# file the agent can write would let one step rewrite the next one's prompt.
PROMPT_ON_STDIN = "/dev/stdin"


def launcher_command() -> tuple[str, ...]:
    """The launcher itself, without its arguments (what a sandbox starts on standby)."""
    return (*LAUNCHER_INTERPRETER, paths.LAUNCHER)


def launcher_argv(agent_argv: list[str], *, prompt_file: str = paths.PROMPT_FILE) -> list[str]:
    return [
        *launcher_command(),
        "--gateway-socket", paths.GATEWAY_SOCKET,
        "--port", str(paths.FORWARDER_PORT),
        "--prompt-file", prompt_file,
        "--", *agent_argv,
    ]


@dataclass(frozen=True)
class AgentEnvironment:
    env: dict[str, str]
    dropped: tuple[str, ...]  # managed keys a config or hook tried to set (for a warning)


def agent_environment(
    config: EvalConfig,
    settings: RunSettings,
    *,
    host_environ: Mapping[str, str],
    hook_env: Mapping[str, str] | None = None,
) -> AgentEnvironment:
    """The exec environment of the agent: a fixed base, allowlisted host
    variables, runner.env and hook-output env; never a credential."""
    layers = [resolve_env(config.runner.env, host_environ), dict(hook_env or {})]
    environment = _environment(host_environ, layers)
    if settings.subagent_model:
        environment.env["CLAUDE_CODE_SUBAGENT_MODEL"] = settings.subagent_model
    return environment


def judge_agent_environment(runner: RunnerConfig, *, host_environ: Mapping[str, str]) -> AgentEnvironment:
    """An agent judge's environment: as the agent's, with the judge's own `agent.runner.env`."""
    return _environment(host_environ, [resolve_env(runner.env, host_environ)])


def _environment(host_environ: Mapping[str, str], layers: list[dict[str, str]]) -> AgentEnvironment:
    env = {
        "HOME": paths.HOME,
        "USER": "agent",
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "PATH": "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin",
    }
    env.update({k: host_environ[k] for k in FORWARDED_FROM_HOST if k in host_environ})
    dropped: list[str] = []
    for layer in layers:
        for key, value in layer.items():
            if key in MANAGED_KEYS:
                dropped.append(key)
                continue
            env[key] = value
    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{paths.FORWARDER_PORT}"
    env["ANTHROPIC_API_KEY"] = PLACEHOLDER_API_KEY
    return AgentEnvironment(env=env, dropped=tuple(dict.fromkeys(dropped)))


def workspace_env(config: EvalConfig, host_environ: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """execution.env for the workspace's .claude/settings.json, minus managed keys."""
    resolved = resolve_env(config.execution.env, host_environ)
    kept = {k: v for k, v in resolved.items() if k not in MANAGED_KEYS}
    return kept, tuple(k for k in resolved if k in MANAGED_KEYS)


# Variables that make the CLI ask for a model other than --model.
MODEL_VARIABLES = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)


def gateway_models(config: EvalConfig, settings: RunSettings, host_environ: Mapping[str, str]) -> list[str]:
    """The models a case's CLI may ask for: the skill and subagent models, the CLI's Haiku
    (its Explore subagent), what the host, runner.env or execution.env name in the CLI's
    model variables, and sandbox.gateway.models."""
    environments = [host_environ, resolve_env(config.runner.env, host_environ),
                    resolve_env(config.execution.env, host_environ)]
    named = [env[key] for env in environments for key in MODEL_VARIABLES if env.get(key)]
    return [m for m in (settings.model, settings.subagent_model, *DEFAULT_SMALL_MODELS, *named,
                        *config.sandbox.gateway.models) if m]


def gateway_policy(config: EvalConfig, settings: RunSettings, host_environ: Mapping[str, str]) -> GatewayPolicy:
    gateway = config.sandbox.gateway
    return GatewayPolicy(
        models=ModelAllowlist.of(gateway_models(config, settings, host_environ)),
        server_tools=frozenset(gateway.server_tools),
        max_tokens_ceiling=gateway.max_tokens,
    )


def judge_gateway_policy(config: EvalConfig, host_environ: Mapping[str, str]) -> GatewayPolicy:
    """The policy of the agent judges' gateway: each agent judge's model (per-judge, `models.judge`,
    $EVAL_JUDGE_MODEL), the CLI's Haiku, what a judge's `agent.runner.env` names in the CLI's model
    variables, and sandbox.gateway.models."""
    gateway = config.sandbox.gateway
    named: list[str] = [m for m in (config.models.judge, host_environ.get("EVAL_JUDGE_MODEL")) if m]
    for judge in config.judges:
        if judge.agent is None:
            continue
        named += [judge.model] if judge.model else []
        runner_env = resolve_env(judge.agent.runner.env, host_environ)
        named += [runner_env[key] for key in MODEL_VARIABLES if runner_env.get(key)]
    return GatewayPolicy(
        models=ModelAllowlist.of([m.strip() for m in (*named, *DEFAULT_SMALL_MODELS, *gateway.models) if m.strip()]),
        server_tools=frozenset(gateway.server_tools),
        max_tokens_ceiling=gateway.max_tokens,
    )


def gateway_upstream_env(config: EvalConfig, host_environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the gateway takes its upstream and credentials from.

    `runner.env: {ANTHROPIC_AUTH_TOKEN: $X}` (common in reference configs) means
    "the agent should use this credential": the gateway uses it on the host,
    the agent never sees it.
    """
    merged = dict(host_environ)
    for key, value in resolve_env(config.runner.env, host_environ).items():
        if key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
            merged[key] = value
    return merged
