from __future__ import annotations

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.yaml_reader import YamlReadError
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.sandbox.policy import limits_of


def test_mode_must_be_case_or_batch(write_eval):
    path = write_eval("execution: {mode: parallel, skill: s}\n")
    with pytest.raises(ConfigError) as info:
        load_eval_config(path)
    assert "execution.mode must be one of ['case', 'batch']" in str(info.value)
    assert str(path) in str(info.value)
    assert "'parallel'" in str(info.value)


def test_skill_and_prompt_are_mutually_exclusive(write_eval):
    path = write_eval("execution: {skill: s, prompt: p}\n")
    with pytest.raises(ConfigError) as info:
        load_eval_config(path)
    assert "execution.skill and execution.prompt are mutually exclusive" in str(info.value)


def test_top_level_skill_moves_into_execution_with_deprecation_warning(write_eval):
    loaded = load_eval_config(write_eval("skill: my-skill\nexecution: {arguments: '{prompt}'}\n"))
    assert loaded.config.execution.skill == "my-skill"
    assert any("deprecated" in w and "execution.skill" in w for w in loaded.warnings)


def test_top_level_skill_conflicts_with_prompt(write_eval):
    with pytest.raises(ConfigError, match="mutually exclusive"):
        load_eval_config(write_eval("skill: s\nexecution: {prompt: p}\n"))


def test_runtime_defaults_stay_null_in_config(write_eval):
    config = load_eval_config(write_eval("execution: {skill: s}\n")).config
    assert config.execution.timeout is None
    assert config.execution.max_budget_usd is None
    assert config.execution.parallelism is None


def test_explicit_zero_is_kept(write_eval):
    config = load_eval_config(write_eval("execution: {skill: s, timeout: 0, max_budget_usd: 0, parallelism: 0}\n")).config
    assert config.execution.timeout == 0
    assert config.execution.max_budget_usd == 0
    assert config.execution.parallelism == 0


def test_name_defaults_to_file_stem(write_eval):
    assert load_eval_config(write_eval("execution: {skill: s}\n", name="smoke.yaml")).config.name == "smoke"


def test_directory_argument_means_eval_yaml_inside(write_eval):
    path = write_eval("name: dir-form\n")
    assert load_eval_config(path.parent).config.name == "dir-form"


def test_unimplemented_keys_warn_once_each_naming_the_key(write_eval):
    loaded = load_eval_config(write_eval("""
        matrix: {models: [a]}
        generation: {strategy: synthetic, seeds: [{category: c, count: 1, prompt: p}]}
        reward: {judge: a}
        judges: [{name: a, check: "return True, ''"}]
        execution: {skill: s}
    """))
    for key in ("matrix", "generation"):
        assert sum(f"'{key}'" in w for w in loaded.warnings) == 1, loaded.warnings
    # reward is computed (judges/reward.py): nothing to warn about
    assert not any("'reward'" in w for w in loaded.warnings), loaded.warnings


def test_unknown_key_warns_with_closest_known_name(write_eval):
    loaded = load_eval_config(write_eval("""
        executon: {skill: s}
        execution: {skil: s, timeout: 5}
        judges:
          - {name: j, chek: "return True, ''"}
    """))
    text = "\n".join(loaded.warnings)
    assert "unknown key 'executon' (did you mean 'execution'?)" in text
    assert "unknown key 'execution.skil' (did you mean 'skill'?)" in text
    assert "unknown key 'judges[0].chek' (did you mean 'check'?)" in text


def test_unknown_threshold_key_warns(write_eval):
    loaded = load_eval_config(write_eval("""
        judges: [{name: j, check: "return True, ''"}]
        thresholds: {j: {min_pass: 1.0}}
    """))
    assert any("thresholds.j.min_pass" in w and "min_pass_rate" in w for w in loaded.warnings)


def test_bad_yaml_is_one_clear_error_with_line(write_eval):
    path = write_eval("execution:\n  mode: [case\n")
    with pytest.raises(YamlReadError) as info:
        load_eval_config(path)
    message = str(info.value)
    assert str(path) in message and "line" in message and "\n" not in message


def test_non_mapping_eval_yaml(write_eval):
    with pytest.raises(YamlReadError, match="must be a mapping"):
        load_eval_config(write_eval("- a\n- b\n"))


def test_missing_file(tmp_path):
    with pytest.raises(YamlReadError, match="file not found"):
        load_eval_config(tmp_path / "nope.yaml")


def test_wrong_type_names_field_and_value(write_eval):
    with pytest.raises(ConfigError) as info:
        load_eval_config(write_eval("execution: {skill: s, timeout: soon}\n"))
    assert "execution.timeout" in str(info.value) and "'soon'" in str(info.value)


def test_negative_timeout_rejected(write_eval):
    with pytest.raises(ConfigError, match="execution.timeout"):
        load_eval_config(write_eval("execution: {skill: s, timeout: -1}\n"))


def test_effort_enum_for_claude_code(write_eval):
    with pytest.raises(ConfigError, match=r"runner.effort must be one of \['low', 'medium', 'high', 'xhigh', 'max'\]"):
        load_eval_config(write_eval("runner: {effort: huge}\n"))


def test_permission_mode_enum(write_eval):
    with pytest.raises(ConfigError, match="runner.permission_mode must be one of"):
        load_eval_config(write_eval("runner: {permission_mode: yolo}\n"))


def test_workspace_mode_only_repo(write_eval):
    with pytest.raises(ConfigError, match="runner.workspace_mode must be unset or 'repo'"):
        load_eval_config(write_eval("runner: {workspace_mode: repository}\n"))


def test_dataset_path_rejects_parent_traversal(write_eval):
    with pytest.raises(ConfigError, match=r"dataset.path must not contain '\.\.'"):
        load_eval_config(write_eval("dataset: {path: ../elsewhere}\n"))


def test_workspace_files_reject_parent_traversal(write_eval):
    with pytest.raises(ConfigError, match=r"must not contain '\.\.'"):
        load_eval_config(write_eval("dataset: {path: c, workspace: {files: [../x]}}\n"))


@pytest.mark.parametrize("bad", ["/tmp/out", "../out", ".", "a/../b"])
def test_output_path_safety(write_eval, bad):
    with pytest.raises(ConfigError, match="outputs"):
        load_eval_config(write_eval(f"outputs: [{{path: '{bad}'}}]\n"))


def test_output_needs_exactly_one_of_path_or_tool(write_eval):
    with pytest.raises(ConfigError, match="exactly one of 'path' or 'tool'"):
        load_eval_config(write_eval("outputs: [{path: a, tool: b}]\n"))


def test_hook_timeout_must_be_positive(write_eval):
    with pytest.raises(ConfigError, match=r"hooks.before_all\[0\].timeout"):
        load_eval_config(write_eval("hooks: {before_all: [{command: 'true', timeout: 0}]}\n"))


def test_hook_on_failure_enum(write_eval):
    with pytest.raises(ConfigError, match=r"hooks.before_each\[0\].on_failure"):
        load_eval_config(write_eval("hooks: {before_each: [{command: 'true', on_failure: ignore}]}\n"))


@pytest.mark.parametrize("phase", ["before_all", "before_scoring", "after_all", "before_report"])
def test_container_scope_only_for_per_case_phases(write_eval, phase):
    with pytest.raises(ConfigError) as info:
        load_eval_config(write_eval(f"hooks: {{{phase}: [{{command: 'true', scope: container}}]}}\n"))
    assert f"hooks.{phase}[0].scope" in str(info.value)
    assert "only allowed in before_each, after_each, before_step and after_step" in str(info.value)


@pytest.mark.parametrize("phase", ["before_each", "after_each"])
def test_container_scope_allowed_per_case(write_eval, phase):
    config = load_eval_config(write_eval(f"hooks: {{{phase}: [{{command: 'true', scope: container}}]}}\n")).config
    assert config.hooks.phase(phase)[0].scope == "container"


def test_hook_scope_enum(write_eval):
    with pytest.raises(ConfigError, match="scope"):
        load_eval_config(write_eval("hooks: {before_each: [{command: 'true', scope: cluster}]}\n"))


def test_per_case_hooks_warn_in_batch_mode(write_eval):
    loaded = load_eval_config(write_eval("""
        execution: {mode: batch, skill: s}
        hooks: {before_each: [{command: 'true'}]}
    """))
    assert any(
        "hooks.before_each, after_each ignored in batch mode (per-case hooks only run in case/prompt mode)" in w
        for w in loaded.warnings
    )


def test_per_case_hooks_warn_in_repo_mode(write_eval):
    loaded = load_eval_config(write_eval("""
        execution: {prompt: p}
        runner: {workspace_mode: repo}
        hooks: {after_each: [{command: 'true'}]}
    """))
    assert any("ignored with runner.workspace_mode: repo" in w for w in loaded.warnings)


def test_duplicate_judge_names(write_eval):
    with pytest.raises(ConfigError, match=r"judges\[1\]\.name \(judge 'a'\) is the name of an earlier judge too"):
        load_eval_config(write_eval("judges: [{name: a, check: x}, {name: a, check: y}]\n"))


def test_builtin_is_exclusive(write_eval):
    with pytest.raises(ConfigError, match=r"judges\[0\]\.builtin \(judge 'a'\) is mutually exclusive with check"):
        load_eval_config(write_eval("judges: [{name: a, builtin: cost_budget, check: x}]\n"))


@pytest.mark.parametrize("bad", ["[5, 1]", "[1]", "[1, 2, 3]", "[a, b]", "[1, .inf]"])
def test_score_range_shape(write_eval, bad):
    with pytest.raises(ConfigError, match=r"judges\[0\]\.score_range \(judge 'a'\) must be a two-element increasing "
                       "numeric list"):
        load_eval_config(write_eval(f"judges: [{{name: a, prompt: p, score_range: {bad}}}]\n"))


def test_bool_feedback_with_score_range_rejected(write_eval):
    with pytest.raises(ConfigError, match="sets feedback_type: bool together with score_range"):
        load_eval_config(write_eval("judges: [{name: a, prompt: p, feedback_type: bool, score_range: [0, 1]}]\n"))


def test_int_feedback_with_fractional_bounds_rejected(write_eval):
    with pytest.raises(ConfigError, match="use feedback_type: float"):
        load_eval_config(write_eval("judges: [{name: a, prompt: p, feedback_type: int, score_range: [0, 2.5]}]\n"))


def test_numeric_llm_judge_without_range_warns(write_eval):
    loaded = load_eval_config(write_eval("judges: [{name: q, prompt: p}]\n"))
    assert any("Judge 'q': numeric judge has no 'score_range'" in w for w in loaded.warnings)


def test_judge_kind_precedence(write_eval):
    config = load_eval_config(write_eval("""
        judges:
          - {name: b, builtin: cost_budget}
          - {name: c, check: x, prompt: p}
          - {name: a, agent: {}, prompt: p}
          - {name: l, llm_rubric: r}
          - {name: m, module: mod, function: f}
          - {name: s}
    """)).config
    assert [j.kind for j in config.judges] == ["builtin", "check", "agent", "llm", "code", "skip"]


def test_bad_jinja_syntax_in_arguments_is_a_load_error(write_eval):
    with pytest.raises(ConfigError) as info:
        load_eval_config(write_eval("execution: {skill: s, arguments: '{{ input.x '}\n"))
    assert "execution.arguments" in str(info.value) and "Jinja2" in str(info.value)


def test_commented_out_blocks_are_defaults(write_eval):
    config = load_eval_config(write_eval("""
        execution:
          skill: s
        inputs:
          tools:
        hooks:
        judges:
    """)).config
    assert config.inputs.tools == [] and config.judges == [] and config.hooks.before_all == []


def test_env_values_coerced_to_strings(write_eval):
    config = load_eval_config(write_eval("execution: {skill: s, env: {DELAY: 100, FLAG: true}}\n")).config
    assert config.execution.env == {"DELAY": "100", "FLAG": "true"}


def test_sandbox_block_defaults_are_hardened(write_eval):
    sandbox = load_eval_config(write_eval("name: x\n")).config.sandbox
    assert sandbox.network == "none"
    assert sandbox.user == "1000:1000"
    assert sandbox.read_only_root and sandbox.no_new_privileges and sandbox.init
    assert sandbox.cap_drop == ["ALL"] and sandbox.cap_add == []
    assert limits_of(sandbox).memory_bytes == 2 * 1024**3


def test_sandbox_block_overrides(write_eval):
    sandbox = load_eval_config(write_eval("""
        sandbox:
          memory: 512m
          disk: 2GiB
          pids: 64
          cpus: 0.5
          runtime: runsc-nonet
          filesystem: {denyRead: [secrets/]}
    """)).config.sandbox
    limits = limits_of(sandbox)  # the sizes as the sandbox gets them
    assert limits.memory_bytes == 512 * 1024**2 and limits.workspace_bytes == 2 * 1024**3
    assert sandbox.pids == 64 and sandbox.cpus == 0.5 and sandbox.runtime == "runsc-nonet"
    assert sandbox.filesystem.deny_read == ["secrets/"]


@pytest.mark.parametrize(
    ("snippet", "needle"),
    [
        ("sandbox: {network: bridge}", "sandbox.network must be 'none'"),
        ("sandbox: {memory: lots}", "not a size"),
        ("sandbox: {user: root}", "sandbox.user must be a numeric uid"),
        ("sandbox: {pids: 2}", "sandbox.pids"),
        ("sandbox: {gateway: {model: [x]}}", "sandbox.gateway.model is not a gateway setting; the keys are models"),
        ("sandbox: {gateway: {server_tools: [web_browse]}}",
         "'web_browse' is not a server tool kind; use some of \\['web_search', 'web_fetch', 'code_execution'"),
        ("sandbox: {gateway: {max_tokens: 100}}", "sandbox.gateway.max_tokens"),
        ("sandbox: {gateway: {models: ['']}}", "sandbox.gateway.models entries must be non-empty"),
        ("sandbox: {gateway: [web_search]}", "sandbox.gateway"),
    ],
)
def test_sandbox_block_errors(write_eval, snippet, needle):
    with pytest.raises(ConfigError, match=needle):
        load_eval_config(write_eval(snippet + "\n"))


def test_the_gateway_block(write_eval):
    gateway = load_eval_config(write_eval("""
        sandbox:
          gateway: {models: [claude-opus-4-6], server_tools: [web_search, mcp], max_tokens: 64000}
    """)).config.sandbox.gateway
    assert gateway.models == ["claude-opus-4-6"] and gateway.server_tools == ["web_search", "mcp"]
    assert gateway.max_tokens == 64000
    default = load_eval_config(write_eval("sandbox: {gateway: null}\n")).config.sandbox.gateway
    assert default.models == [] and default.server_tools == [] and default.max_tokens == 128_000


def test_permissions_mixed_forms(write_eval):
    perms = load_eval_config(write_eval("""
        permissions:
          deny: ["mcp__*", {path: eval/, tools: [Read, Bash]}]
          allow: [Skill]
    """)).config.permissions
    assert perms.has_path_rules
    assert perms.deny[0] == "mcp__*" and perms.deny[1].path == "eval/"


def test_error_is_single_line(write_eval):
    with pytest.raises(ConfigError) as info:
        load_eval_config(write_eval("judges: [{name: a, score_range: 3, prompt: p}]\n"))
    assert "\n" not in str(info.value)
