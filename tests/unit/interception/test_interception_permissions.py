"""The permissions compiler, on the reference's own examples (reference_config_permissions.md)."""

from __future__ import annotations

from agent_eval_sandbox.config.models import PathRule, PermissionsConfig
from agent_eval_sandbox.interception.permissions import (
    PATH_SCOPED_TOOLS,
    compile_permission_rules,
    compile_permissions,
)


def perms(**data) -> PermissionsConfig:
    return PermissionsConfig.model_validate(data)


def rules(*entries):
    return [PathRule.model_validate(e) if isinstance(e, dict) else e for e in entries]


def test_path_scoped_tools_are_the_references():
    assert PATH_SCOPED_TOOLS == ("Read", "Edit", "Write", "Grep", "Glob")


def test_a_directory_becomes_recursive_and_a_file_stays_verbatim():
    # | `eval/` | `Read(eval/**)` |  and  | `eval.yaml` | `Read(eval.yaml)` |
    assert compile_permission_rules(rules({"path": "eval/", "tools": ["Read"]})) == ["Read(eval/**)"]
    assert compile_permission_rules(rules({"path": "eval.yaml", "tools": ["Read"]})) == ["Read(eval.yaml)"]


def test_harden_bash_on_a_deny_list():
    # deny: [{path: "eval/", tools: ["Bash"]}]  compiles (deny, harden_bash=True) to:
    assert compile_permission_rules(rules({"path": "eval/", "tools": ["Bash"]}), harden_bash=True) == [
        "Read(eval/**)",
        "Edit(eval/**)",
    ]


def test_harden_bash_is_deny_only():
    assert compile_permission_rules(rules({"path": "eval/", "tools": ["Bash"]})) == []


def test_tools_that_take_no_path_are_dropped():
    assert compile_permission_rules(rules({"path": "x/", "tools": ["Skill", "Write", "mcp__a"]})) == ["Write(x/**)"]


def test_simple_strings_pass_through_and_results_are_deduplicated_in_order():
    entries = rules("mcp__*", {"path": "eval/", "tools": ["Read", "Edit"]}, "Read(eval/**)", "mcp__*", "Skill")
    assert compile_permission_rules(entries, harden_bash=True) == ["mcp__*", "Read(eval/**)", "Edit(eval/**)", "Skill"]


def test_the_common_patterns_example():
    config = perms(
        deny=[
            "mcp__*",
            {"path": "eval/", "tools": ["Read", "Edit", "Bash"]},
            {"path": "eval.yaml", "tools": ["Read"]},
            {"path": "eval.md", "tools": ["Read"]},
            {"path": "tmp/", "tools": ["Read", "Edit"]},
        ]
    )
    compiled = compile_permissions(config)
    assert list(compiled.deny) == [
        "mcp__*", "Read(eval/**)", "Edit(eval/**)", "Read(eval.yaml)", "Read(eval.md)", "Read(tmp/**)", "Edit(tmp/**)",
    ]
    # Any path rule: the rules go to settings, not to the command line.
    assert compiled.cli_flags() == []


def test_the_two_forms_example_compiles_both_lists():
    config = perms(
        deny=["mcp__*", {"path": "eval/", "tools": ["Read", "Bash"]}],
        allow=["Skill", {"path": "artifacts/", "tools": ["Write"]}],
    )
    compiled = compile_permissions(config)
    assert compiled.settings_block() == {
        "allow": ["Skill", "Write(artifacts/**)"],
        "deny": ["mcp__*", "Read(eval/**)", "Edit(eval/**)"],
    }
    assert compiled.cli_flags() == []


def test_a_path_rule_on_the_allow_side_alone_switches_the_deny_list_to_settings_too():
    compiled = compile_permissions(perms(deny=["mcp__*"], allow=[{"path": "artifacts/", "tools": ["Write"]}]))
    assert compiled.cli_flags() == []
    assert compiled.settings_block() == {"allow": ["Write(artifacts/**)"], "deny": ["mcp__*"]}


def test_simple_only_becomes_cli_flags():
    # claude --print --disallowed-tools "mcp__*" --allowed-tools "Skill,Read"
    compiled = compile_permissions(perms(deny=["mcp__*"], allow=["Skill", "Read"]))
    assert compiled.cli_flags() == ["--disallowed-tools", "mcp__*", "--allowed-tools", "Skill,Read"]
    assert compiled.settings_block() == {"allow": ["Skill", "Read"], "deny": ["mcp__*"]}


def test_nothing_configured_compiles_to_nothing():
    compiled = compile_permissions(perms())
    assert (compiled.cli_flags(), compiled.settings_block()) == ([], {})
