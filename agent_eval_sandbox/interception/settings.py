"""The Claude Code settings and flags a case's container runs with.

Measured with CLI 2.1.332 in the sandbox image:

- Managed settings (`/etc/claude-code/managed-settings.json`, bind-mounted
  read-only) are honoured in `-p` mode. Their PreToolUse hook runs before
  every other hook and a deny from it is final; `disableAllHooks` in the
  workspace's `.claude/settings.json` or `settings.local.json` (at start or
  written mid-run) does not switch it off. Their permission rules apply.
- A hook that crashes, is killed or times out lets the call through unless
  the hook entry says `"onFailure": "block"`; with it, every such failure
  blocks. Both of our hook entries carry it.
- An `allow` + `updatedInput.answers` for AskUserQuestion is honoured only
  from a non-managed hook (a managed hook's allow goes on to the permission
  prompt, which -p cannot show). So questions are answered by a second hook,
  given inline with `--settings` (the command line, not a file the agent can
  edit), matching AskUserQuestion only; the broker gives both hooks the same
  decision. `allowManagedHooksOnly` exists and would switch that hook off,
  so it is not set.
- AskUserQuestion exists in -p mode only with `--permission-prompt-tool stdio`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.interception.handlers import (
    ASK_USER_QUESTION,
    ToolHandlers,
)
from agent_eval_sandbox.interception.permissions import compile_permissions

HOOK_CLIENT_PATH = paths.HOOK_CLIENT
# An absolute interpreter in isolated mode: neither PATH nor PYTHON* variables
# (which the agent could try to set through settings env) choose what runs.
# An execute-only python3 (made in the image): the hook process is non-dumpable. -S: the
# standard library alone, without `site`'s start-up, for a process started at every tool call.
HOOK_COMMAND = " ".join((*paths.PROTECTED_INTERPRETER, HOOK_CLIENT_PATH))
MANAGED_SETTINGS_PATH = paths.MANAGED_SETTINGS
# The reference's per-hook timeout, sized for a batch of LLM-answered
# questions. The client gives up (and denies) well before it, the broker's
# answer budget is smaller still, and onFailure: block covers the rest.
HOOK_TIMEOUT_S = 120


# The hook client answers for the host, but the CLI starts it (through `sh`) with its own environment,
# to which every settings file's `env` adds, and a pipeline's next step starts a CLI that reads the
# settings files an earlier step wrote. Variables that make the dynamic loader or a shell run code of
# the agent's choosing in that `sh` and that interpreter are cleared by the managed settings, which
# win over every other settings file key by key (red team round 8: `LD_PRELOAD` of a library in
# $HOME made the hook client allow a call the host denied, unrecorded). `-I` covers `PYTHON*`.
HOOK_ENV_CLEARED = (
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH",
    "BASH_ENV", "ENV",
)


def cleared_env_warnings(config: EvalConfig) -> list[str]:
    """The variables of HOOK_ENV_CLEARED an eval sets for its agent while `inputs.tools` installs the
    gate hook: its tools will see them empty, which nothing else would tell the author."""
    if not config.inputs.tools:
        return []
    places: list[tuple[str, Any]] = [
        ("execution.env", config.execution.env),
        ("runner.env", config.runner.env),
        ("runner.settings.env", config.runner.settings.get("env")),
    ]
    for index, step in enumerate(config.execution.steps):
        places.append((f"execution.steps[{index}].env", step.env))
        if step.runner is not None:
            places.append((f"execution.steps[{index}].runner.env", step.runner.env))
            places.append((f"execution.steps[{index}].runner.settings.env", step.runner.settings.get("env")))
    return [
        f"{where}.{key} is cleared for the agent's tools while inputs.tools intercepts them (a loader or "
        "shell variable could make the gate hook run the agent's code); set it in the tool's own command"
        for where, env in places if isinstance(env, Mapping)
        for key in HOOK_ENV_CLEARED if key in env
    ]


def hook_entry(matcher: str, command: str = HOOK_COMMAND) -> dict[str, Any]:
    return {
        "matcher": matcher,
        "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S, "onFailure": "block"}],
    }


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """`overlay` merged into a copy of `base`: mappings recursively, lists extended, scalars replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            merged[key] = current + copy.deepcopy(value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def workspace_settings(workspace_env: Mapping[str, str], runner_settings: Mapping[str, Any]) -> dict[str, Any]:
    """`.claude/settings.json`: execution.env, then runner.settings over it (the reference's order)."""
    base: dict[str, Any] = {"env": dict(workspace_env)} if workspace_env else {}
    return deep_merge(base, runner_settings)


def managed_settings(config: EvalConfig, handlers: ToolHandlers | None) -> dict[str, Any]:
    """The read-only managed settings: the broker's gate hook on every tool, and the permission rules."""
    settings: dict[str, Any] = {}
    if handlers is not None and handlers.handlers:  # the AskUserQuestion hook's handlers among them
        settings["hooks"] = {"PreToolUse": [hook_entry("*")]}
        # Cleared for every process of the CLI's, the agent's tools among them: a tool that needs one
        # sets it in its own command.
        settings["env"] = dict.fromkeys(HOOK_ENV_CLEARED, "")
    permissions = compile_permissions(config.permissions).settings_block()
    if permissions:
        settings["permissions"] = permissions
    return settings


def answer_hook_settings() -> dict[str, Any]:
    """The `--settings` JSON of the hook that answers AskUserQuestion (see the module docstring)."""
    return {"hooks": {"PreToolUse": [hook_entry(ASK_USER_QUESTION)]}}


def cli_flags(config: EvalConfig, handlers: ToolHandlers | None) -> list[str]:
    flags = compile_permissions(config.permissions).cli_flags()
    if handlers is not None and handlers.asks_user():
        flags += [
            "--permission-prompt-tool", "stdio",
            "--settings", json.dumps(answer_hook_settings(), separators=(",", ":")),
        ]
    return flags


@dataclass(frozen=True)
class ContainerSettings:
    workspace_settings: dict[str, Any]  # -> /workspace/.claude/settings.json (the agent may edit it)
    managed_settings: dict[str, Any]  # -> MANAGED_SETTINGS_PATH, bind-mounted read-only
    cli_flags: list[str]  # appended to `claude -p ...`

    @property
    def intercepts(self) -> bool:
        """Whether the case needs a broker (the gate hook is installed)."""
        return "hooks" in self.managed_settings


def build_container_settings(
    config: EvalConfig,
    handlers: ToolHandlers | None,
    *,
    workspace_env: Mapping[str, str],
) -> ContainerSettings:
    """Everything the runner writes or passes for one case; `workspace_env` is
    execution.env resolved against the host (credentials already removed)."""
    return ContainerSettings(
        workspace_settings=workspace_settings(workspace_env, config.runner.settings),
        managed_settings=managed_settings(config, handlers),
        cli_flags=cli_flags(config, handlers),
    )
