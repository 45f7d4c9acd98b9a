"""What the runner writes and passes for a case: workspace settings, managed settings, flags."""

from __future__ import annotations

import json

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.interception.handlers import parse_handlers
from agent_eval_sandbox.interception.settings import (
    HOOK_TIMEOUT_S,
    build_container_settings,
    cleared_env_warnings,
    deep_merge,
)

GATE_HOOK = {
    "type": "command",
    "command": "/usr/bin/python3-agent-eval -I -S /opt/agent-eval/hook_client.py",
    "timeout": HOOK_TIMEOUT_S,
    "onFailure": "block",
}
# Managed settings win over the settings files the agent can write: nothing of theirs may make the
# dynamic loader or a shell run code of the agent's in the hook client's processes.
CLEARED_ENV = {name: "" for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "GLIBC_TUNABLES",
                                     "LOCPATH", "NLSPATH", "BASH_ENV", "ENV")}
ASK = {"match": "questions", "patterns": ["AskUserQuestion"]}
JIRA = {"match": "jira", "patterns": ["mcp__jira__*"]}


def config(**data) -> EvalConfig:
    return EvalConfig.model_validate(data)


def handlers(*entries):
    return parse_handlers({"handlers": list(entries)}, "t")


def test_deep_merge_lets_scalars_win_and_extends_lists():
    base = {"env": {"A": "1", "B": "2"}, "permissions": {"allow": ["Read"]}, "model": "x"}
    overlay = {"env": {"B": "3"}, "permissions": {"allow": ["Skill"], "deny": ["Bash"]}, "model": "y", "new": [1]}
    assert deep_merge(base, overlay) == {
        "env": {"A": "1", "B": "3"},
        "permissions": {"allow": ["Read", "Skill"], "deny": ["Bash"]},
        "model": "y",
        "new": [1],
    }
    assert base["permissions"]["allow"] == ["Read"]  # inputs untouched


def test_workspace_settings_hold_execution_env_then_runner_settings():
    built = build_container_settings(
        config(runner={"settings": {"env": {"B": "runner"}, "includeCoAuthoredBy": False}}),
        None,
        workspace_env={"A": "exec", "B": "exec"},
    )
    assert built.workspace_settings == {"env": {"A": "exec", "B": "runner"}, "includeCoAuthoredBy": False}
    # No hook and no policy in the file the agent can edit.
    assert "hooks" not in built.workspace_settings and "permissions" not in built.workspace_settings


def test_managed_settings_gate_every_tool_and_carry_the_permissions():
    built = build_container_settings(
        config(permissions={"deny": [{"path": "eval/", "tools": ["Read", "Bash"]}], "allow": ["Skill"]}),
        handlers(JIRA),
        workspace_env={},
    )
    assert built.managed_settings == {
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [GATE_HOOK]}]},
        "env": CLEARED_ENV,
        "permissions": {"allow": ["Skill"], "deny": ["Read(eval/**)", "Edit(eval/**)"]},
    }
    assert built.intercepts
    # A path rule: no permission flags; no question handler: no question flags.
    assert built.cli_flags == []


def test_simple_permissions_are_flags_and_managed_rules():
    built = build_container_settings(config(permissions={"deny": ["mcp__*"]}), None, workspace_env={})
    assert built.cli_flags == ["--disallowed-tools", "mcp__*"]
    assert built.managed_settings == {"permissions": {"deny": ["mcp__*"]}}
    assert not built.intercepts


def test_a_question_handler_enables_the_tool_and_the_answering_hook():
    built = build_container_settings(config(), handlers(ASK, JIRA), workspace_env={})
    assert built.cli_flags[:2] == ["--permission-prompt-tool", "stdio"]
    assert built.cli_flags[2] == "--settings"
    assert json.loads(built.cli_flags[3]) == {
        "hooks": {"PreToolUse": [{"matcher": "AskUserQuestion", "hooks": [GATE_HOOK]}]}
    }
    assert built.managed_settings["env"] == CLEARED_ENV  # the answering hook's processes too


def test_a_catch_all_handler_answers_questions_too():
    built = build_container_settings(config(), handlers({"match": "all", "patterns": ["*"]}), workspace_env={})
    assert "--permission-prompt-tool" in built.cli_flags


def test_handlers_without_entries_install_no_hook():
    built = build_container_settings(config(), handlers(), workspace_env={})
    assert built.managed_settings == {} and built.cli_flags == [] and not built.intercepts


TOOLS = {"tools": [{"match": "Bash calls", "prompt": "answer as the test server would"}]}


def test_loader_variables_an_eval_sets_are_named_when_interception_clears_them():
    env = {"LD_PRELOAD": "/opt/lib/fake.so", "GREETING": "hi"}
    eval_config = config(
        inputs=TOOLS,
        execution={"env": env, "steps": [
            {"id": "build", "prompt": "build it", "env": {"BASH_ENV": "/w/rc"}},
            {"id": "check", "prompt": "check it",
             "runner": {"env": {"LD_LIBRARY_PATH": "/opt/lib"}, "settings": {"env": {"ENV": "/w/rc"}}}},
        ]},
        runner={"settings": {"env": {"GLIBC_TUNABLES": "glibc.malloc.check=3", "OTHER": "1"}}},
    )
    named = [warning.split(" is cleared")[0] for warning in cleared_env_warnings(eval_config)]
    assert named == [
        "execution.env.LD_PRELOAD",
        "runner.settings.env.GLIBC_TUNABLES",
        "execution.steps[0].env.BASH_ENV",
        "execution.steps[1].runner.env.LD_LIBRARY_PATH",
        "execution.steps[1].runner.settings.env.ENV",
    ]
    assert all("set it in the tool's own command" in warning for warning in cleared_env_warnings(eval_config))
    # The same variables are what the managed settings clear: the warning names nothing they keep.
    built = build_container_settings(eval_config, handlers(ASK), workspace_env=env)
    assert {name.rsplit(".", 1)[1] for name in named} <= set(built.managed_settings["env"])


def test_without_interception_an_eval_s_loader_variables_pass_unwarned():
    eval_config = config(execution={"env": {"LD_PRELOAD": "/opt/lib/fake.so"}},
                         runner={"env": {"LD_LIBRARY_PATH": "/opt/lib"}, "settings": {"env": "not a mapping"}})
    assert cleared_env_warnings(eval_config) == []
    assert "env" not in build_container_settings(eval_config, None, workspace_env={}).managed_settings
