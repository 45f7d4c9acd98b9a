"""Every load-time rule of the reference (docs/validation.md): the config is refused with one line
naming the file, the field with its index, the judge/hook/step/seed by name, and what to write."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.errors import ConfigError

CHECK = "return True, ''"


def _refused(write_eval, text: str, *needles: str) -> str:
    path = write_eval(text)
    with pytest.raises(ConfigError) as info:
        load_eval_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    for internal in ("Config", "pydantic", "Input should", "Value error", "validation error"):
        assert internal not in message, message
    return message


def _loads(write_eval, text: str):
    return load_eval_config(write_eval(text))


# --- execution ----------------------------------------------------------------------------

def test_execution_mode_enum_reference_message(write_eval):
    _refused(write_eval, "execution: {mode: parallel, skill: s}\n",
             "execution.mode must be one of ['case', 'batch'] (got 'parallel')")


def test_execution_skill_xor_prompt_reference_message(write_eval):
    _refused(write_eval, "execution: {skill: s, prompt: p}\n",
             "execution.skill and execution.prompt are mutually exclusive")


@pytest.mark.parametrize("skill", ["/etc/passwd", "../../outside", "a/../../b"])
def test_execution_skill_is_contained(write_eval, skill):
    _refused(write_eval, f"execution: {{skill: '{skill}'}}\n", "execution.skill", skill)


@pytest.mark.parametrize("key", ["arguments", "prompt"])
def test_execution_template_syntax(write_eval, key):
    skill = "skill: s, " if key == "arguments" else ""
    _refused(write_eval, f"execution: {{{skill}{key}: '{{{{ input.x '}}\n", f"execution.{key}", "Jinja2")


# --- execution.steps ----------------------------------------------------------------------

STEPS_OK = """
execution:
  mode: case
  env: {A: "1"}
  steps:
    - id: create
      skill: rfe.create
      arguments: "{{ input.prompt }}"
      env: {B: 2}
      timeout: 600
      max_budget_usd: 1.5
      runner: {effort: high}
      on_failure: continue
    - id: review
      prompt: "Review {{ steps.create.output }} ({{ steps['create'].exit_code }})"
judges:
  - {name: whole, check: "return True, ''"}
  - {name: review_only, check: "return True, ''", step: review}
"""


def test_a_valid_pipeline_loads_with_every_step_field(write_eval):
    loaded = _loads(write_eval, STEPS_OK)
    create, review = loaded.config.execution.steps
    assert (create.id, create.skill, create.env, create.timeout, create.max_budget_usd) == (
        "create", "rfe.create", {"B": "2"}, 600, 1.5)
    assert create.on_failure == "continue" and review.on_failure == "fail"
    assert create.runner is not None and create.runner.set_fields == {"effort": "high"}
    assert create.template == "{{ input.prompt }}" and review.template.startswith("Review")
    assert loaded.config.judges[1].step == "review"
    assert not any("execution.steps" in w for w in loaded.warnings), loaded.warnings


@pytest.mark.parametrize(("steps", "needles"), [
    ("[{id: a, skill: s}, {id: a, skill: t}]", ["execution.steps[1].id (step 'a')", "earlier step too"]),
    ("[{id: '../x', skill: s}]", ["execution.steps[0].id (step '../x')", "letters, digits"]),
    ("[{id: 'a b', skill: s}]", ["execution.steps[0].id", "letters, digits"]),
    ("[{id: '', skill: s}]", ["execution.steps[0].id", "letters, digits"]),
    ("[{skill: s}]", ["execution.steps[0].id is required"]),
    ("[{id: a}]", ["execution.steps[0].skill (step 'a')", "sets neither skill nor prompt"]),
    ("[{id: a, skill: s, prompt: p}]", ["execution.steps[0].skill (step 'a')", "sets both skill and prompt"]),
    ("[{id: a, skill: /s}]", ["execution.steps[0].skill (step 'a')", "leading '/'"]),
    ("[{id: a, skill: ../s}]", ["execution.steps[0].skill (step 'a')", "no '..'"]),
    ("[{id: a, prompt: '{{ steps.b.output }}'}, {id: b, prompt: p}]",
     ["execution.steps[0].prompt (step 'a')", "steps.b, which is a later step or itself"]),
    ("[{id: a, prompt: '{{ steps.zzz.output }}'}]", ["execution.steps[0].prompt", "steps.zzz, which is no step"]),
    ("[{id: a, skill: s, arguments: '{{ steps.a.files }}'}]", ["execution.steps[0].arguments", "itself"]),
    ("[{id: a, skill: s, arguments: '{{ input.x '}]", ["execution.steps[0].arguments (step 'a')", "Jinja2"]),
    ("[{id: a, skill: s, on_failure: ignore}]", ["execution.steps[0].on_failure (step 'a')",
                                                 "must be one of 'fail' or 'continue'"]),
    ("[{id: a, skill: s, timeout: -5}]", ["execution.steps[0].timeout (step 'a') must be at least 0"]),
    ("[{id: a, skill: s, runner: {workspace_mode: repo}}]",
     ["execution.steps[0].runner.workspace_mode (step 'a')", "not of one step"]),
    ("[{id: a, skill: s, runner: {effort: huge}}]", ["execution.steps[0].runner.effort (step 'a') must be one of"]),
    ("[{id: a, skill: s, env: [x]}]", ["execution.steps[0].env (step 'a') must be a mapping"]),
])
def test_invalid_steps(write_eval, steps, needles):
    _refused(write_eval, f"execution:\n  steps: {steps}\n", *needles)


def test_steps_are_case_mode_only(write_eval):
    _refused(write_eval, "execution: {mode: batch, steps: [{id: a, skill: s}]}\n",
             "execution.steps are case-mode only")


@pytest.mark.parametrize("top", ["skill: s", "prompt: p"])
def test_steps_replace_skill_and_prompt(write_eval, top):
    _refused(write_eval, f"execution: {{{top}, steps: [{{id: a, skill: s}}]}}\n",
             "execution.steps replaces execution.skill/prompt")


def test_judge_step_must_name_a_step(write_eval):
    _refused(write_eval, STEPS_OK.replace("step: review", "step: reviw"),
             "judges[1].step (judge 'review_only') 'reviw' is no step id")
    _refused(write_eval, f"judges: [{{name: j, check: \"{CHECK}\", step: a}}]\n",
             "judges[0].step (judge 'j') scopes the judge to a step, but execution.steps is not set")


def test_step_hooks_load_and_warn_without_steps(write_eval):
    loaded = _loads(write_eval, "hooks: {before_step: [{command: 'echo $STEP_ID', scope: container}]}\n")
    assert loaded.config.hooks.before_step[0].scope == "container"
    assert any("hooks.before_step ignored" in w for w in loaded.warnings)


def test_arguments_beside_steps_warn(write_eval):
    loaded = _loads(write_eval, "execution: {arguments: x, steps: [{id: a, prompt: p}]}\n")
    assert any("execution.arguments is ignored with execution.steps" in w for w in loaded.warnings)


# --- hooks --------------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", ["0", "-1", "'30'", "1.5", "true", "[30]"])
def test_hook_timeout_is_a_positive_integer(write_eval, timeout):
    _refused(write_eval, f"hooks: {{before_all: [{{description: Start API, command: 'true', timeout: {timeout}}}]}}\n",
             "hooks.before_all[0].timeout (hook 'Start API')", "must be")


def test_hook_is_named_by_its_command_without_description(write_eval):
    _refused(write_eval, "hooks: {after_all: [{command: ./stop.sh, on_failure: never}]}\n",
             "hooks.after_all[0].on_failure (hook './stop.sh') must be one of 'fail' or 'continue'")


def test_hook_command_must_be_text(write_eval):
    _refused(write_eval, "hooks: {before_each: [{command: [a, b]}]}\n", "hooks.before_each[0].command must be a string")


def test_a_hook_phase_must_be_a_list_of_mappings(write_eval):
    _refused(write_eval, "hooks: {before_all: [echo hi]}\n", "hooks.before_all[0] must be a mapping")


# --- judges -------------------------------------------------------------------------------

@pytest.mark.parametrize(("judge", "needles"), [
    ("{name: q, prompt: p, score_range: 3}", ["judges[0].score_range (judge 'q') must be a two-element"]),
    ("{name: q, prompt: p, score_range: [5, 1]}", ["judges[0].score_range (judge 'q')"]),
    ("{name: q, prompt: p, score_range: [true, 2]}", ["judges[0].score_range (judge 'q')"]),
    ("{name: q, builtin: 3}", ["judges[0].builtin (judge 'q') must be a string naming a builtin judge"]),
    ("{name: q, builtin: cost_budget, agent: {}}", ["judges[0].builtin (judge 'q') is mutually exclusive with agent"]),
    ("{name: q, check: x, arguments: [1]}", ["judges[0].arguments (judge 'q') must be a mapping"]),
    ("{name: q, prompt: p, samples: 0}", ["judges[0].samples (judge 'q') must be a positive whole number"]),
    ("{name: q, prompt: p, samples: '3'}", ["judges[0].samples (judge 'q') must be a positive whole number"]),
    ("{name: q, prompt_file: ../../etc/passwd}", ["judges[0].prompt_file (judge 'q')", "climb out"]),
    ("{name: q, prompt: p, context: [ok.md, ../../x.md]}", ["judges[0].context[1] (judge 'q')", "climb out"]),
    ("{name: q, module: ../grade.py, function: f}", ["judges[0].module (judge 'q')", "dotted Python module name"]),
    ("{name: '', check: x}", ["judges[0].name must not be empty"]),
    ("{check: x}", ["judges[0].name is required"]),
    ("{name: q, prompt: p, feedback_type: bool, score_range: [0, 1]}",
     ["judges[0] (judge 'q') sets feedback_type: bool together with score_range"]),
    ("{name: q, prompt: p, feedback_type: int, score_range: [0, 2.5]}",
     ["judges[0] (judge 'q') sets feedback_type: int with fractional score_range bounds", "use feedback_type: float"]),
])
def test_invalid_judges(write_eval, judge, needles):
    _refused(write_eval, f"judges: [{{name: first, check: x}}, {judge}]\n".replace("judges[0]", "judges[1]"),
             *(n.replace("judges[0]", "judges[1]") for n in needles))


def test_absolute_prompt_file_is_allowed_as_in_the_reference(write_eval, tmp_path):
    loaded = _loads(write_eval, f"judges: [{{name: q, prompt_file: {tmp_path}/p.md, score_range: [1, 5]}}]\n")
    assert loaded.config.judges[0].prompt_file == f"{tmp_path}/p.md"


# --- agent judges -------------------------------------------------------------------------

def test_an_agent_judge_loads_with_every_field(write_eval):
    loaded = _loads(write_eval, """
        outputs: [{path: strat-tasks}]
        judges:
          - name: architecture
            prompt_file: prompts/arch.md
            feedback_type: int
            score_range: [0, 2]
            samples: 3
            agent:
              runner: {type: claude-code, effort: low}
              allowed_tools: [Read, Grep, Glob, Bash]
              context: [.context/architecture]
              inputs: [strat-tasks]
              timeout: 300
              max_budget_usd: 0.5
    """)
    judge = loaded.config.judges[0]
    assert judge.kind == "agent" and judge.agent is not None
    assert judge.agent.allowed_tools == ["Read", "Grep", "Glob", "Bash"] and judge.agent.inputs == ["strat-tasks"]
    assert judge.agent.timeout == 300 and judge.agent.max_budget_usd == 0.5 and judge.agent.runner.effort == "low"
    defaults = _loads(write_eval, "judges: [{name: a, llm_rubric: ok, agent: {}}]\n").config.judges[0].agent
    assert defaults is not None and defaults.allowed_tools == ["Read", "Grep", "Glob"]
    assert defaults.inputs is None and defaults.timeout is None and defaults.max_budget_usd == 2.0


@pytest.mark.parametrize(("agent", "needles"), [
    ("{runner: {workspace_mode: repo}}", ["judges[0].agent.runner.workspace_mode (judge 'a')", "refused for agent"]),
    ("{runner: {type: llama}}", ["judges[0].agent.runner.type (judge 'a') must be one of"]),
    ("{runner: {effort: huge}}", ["judges[0].agent.runner.effort (judge 'a') must be one of"]),
    ("{runner: {type: codex, workspace_mode: repo}}", ["judges[0].agent.runner.workspace_mode (judge 'a')"]),
    ("{timeout: 0}", ["judges[0].agent.timeout (judge 'a') must be a positive whole number"]),
    ("{max_budget_usd: -1}", ["judges[0].agent.max_budget_usd (judge 'a') must be at least 0"]),
    ("{allowed_tools: Read}", ["judges[0].agent.allowed_tools (judge 'a') must be a list"]),
    ("{inputs: [../secrets]}", ["judges[0].agent.inputs[0] (judge 'a')", "'..'"]),
    ("{context: [../../etc]}", ["judges[0].agent.context[0] (judge 'a')", "climb out"]),
    ("[Read]", ["judges[0].agent (judge 'a') must be a mapping"]),
])
def test_invalid_agent_blocks(write_eval, agent, needles):
    _refused(write_eval, f"judges: [{{name: a, prompt: p, agent: {agent}}}]\n", *needles)


def test_an_agent_judge_needs_instructions(write_eval):
    _refused(write_eval, "judges: [{name: a, agent: {}}]\n",
             "judges[0].agent (judge 'a') has no instructions", "prompt, prompt_file or llm_rubric")


def test_agent_inputs_naming_no_output_warn(write_eval):
    loaded = _loads(write_eval, """
        outputs: [{path: out/tasks}]
        judges: [{name: a, llm_rubric: ok, feedback_type: bool, agent: {inputs: [tasks, out/tasks, ., nothing]}}]
    """)
    relevant = [w for w in loaded.warnings if "agent.inputs" in w]
    assert len(relevant) == 1 and "'nothing' names no outputs[].path" in relevant[0]


# --- runner and interception ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "needles"), [
    ("runner: {type: codex, workspace_mode: repo}", ["runner.workspace_mode", "runner.type codex"]),
    ("runner: {type: codex, effort: max}", ["runner.effort must be one of ['minimal', 'low', 'medium', 'high', "
                                            "'xhigh'] for runner.type codex"]),
    ("runner: {type: codex}\ninputs: {tools: [{match: AskUserQuestion, prompt: p}]}",
     ["inputs.tools cannot be used with runner.type codex"]),
    ("runner: {type: claude-code, effort: minimal}", ["runner.effort must be one of ['low'"]),
    ("runner: {plugin_dirs: ['']}", ["runner.plugin_dirs[0] must name a directory"]),
    ("runner: {type: llama}", ["runner.type must be one of ['claude-code', 'codex', 'cli', 'responses-api']"]),
    ("runner: {command: 3}", ["runner.command"]),
])
def test_runner_combinations_the_reference_refuses(write_eval, text, needles):
    _refused(write_eval, text + "\n", *needles)


def test_effort_enum_is_not_checked_for_runners_that_do_not_read_it(write_eval):
    assert _loads(write_eval, "runner: {type: cli, command: x, effort: whatever}\n").config.runner.effort == "whatever"


def test_cli_runner_without_command_warns(write_eval):
    loaded = _loads(write_eval, "runner: {type: cli}\n")
    assert any("runner.command is required by runner.type cli" in w for w in loaded.warnings)


def test_absolute_plugin_dirs_are_an_explicit_opt_in(write_eval):
    assert _loads(write_eval, "runner: {plugin_dirs: [/opt/plugins/x, ../shared]}\n").config.runner.plugin_dirs == [
        "/opt/plugins/x", "../shared"]


# --- dataset, inputs, outputs -------------------------------------------------------------

@pytest.mark.parametrize(("text", "needles"), [
    ("dataset: {path: ../elsewhere}", ["dataset.path must not contain '..'"]),
    ("dataset: {path: cases, workspace: {files: [/etc/passwd]}}",
     ["dataset.workspace.files[0]", "absolute paths are refused", "/etc/passwd"]),
    ("dataset: {path: cases, workspace: {files: [ok.md, ../x]}}", ["dataset.workspace.files[1] must not contain '..'"]),
    ("dataset: {path: cases, workspace: {files: [.]}}", ["dataset.workspace.files[0]", "not the directory itself"]),
    ("dataset: {path: cases, workspace: {files: ['~/.ssh']}}", ["dataset.workspace.files[0]", "absolute"]),
    ("inputs: {tools: [{match: m, prompt_file: /etc/prompt.md}]}", ["inputs.tools[0].prompt_file", "absolute"]),
    ("inputs: {tools: [{match: m, prompt_file: ../../p.md}]}", ["inputs.tools[0].prompt_file", "climb out"]),
    ("inputs: {tools: [{prompt: p}]}", ["inputs.tools[0].match is required"]),
    ("outputs: [{path: /tmp/out}]", ["outputs[0].path", "absolute"]),
    ("outputs: [{path: ../out}]", ["outputs[0].path must not contain '..'"]),
    ("outputs: [{path: .}]", ["outputs[0].path", "not the directory itself"]),
    ("outputs: [{path: a, tool: b}]", ["outputs[0].path sets both or neither"]),
    ("outputs: [{schema: s}]", ["outputs[0].path sets both or neither"]),
])
def test_path_fields_are_contained(write_eval, text, needles):
    _refused(write_eval, text + "\n", *needles)


def test_absolute_dataset_path_is_allowed(write_eval):
    assert _loads(write_eval, "dataset: {path: /shared/cases}\n").config.dataset.path == "/shared/cases"


def test_workspace_files_are_ignored_in_batch_mode_with_a_warning(write_eval):
    loaded = _loads(write_eval, "execution: {mode: batch, skill: s}\ndataset: {workspace: {files: [src]}}\n")
    assert any("dataset.workspace.files is ignored in batch mode" in w for w in loaded.warnings)


def test_workspace_files_are_normalised(write_eval):
    files = _loads(write_eval, "dataset: {workspace: {files: [src/, ./notes.md, a//b]}}\n").config.dataset.workspace.files
    assert files == ["src", "notes.md", "a/b"]


# --- generation ---------------------------------------------------------------------------

def test_a_synthetic_generation_block_loads_and_is_ignored(write_eval):
    loaded = _loads(write_eval, """
        generation:
          strategy: synthetic
          context: {documentation_structure: {entry_point: CLAUDE.md}}
          seeds:
            - {category: navigation, builtin: docs/navigation, count: 10}
            - {category: apis, prompt_file: ./eval/prompts/api.md, count: 8, description: d}
            - {category: adhoc, count: 3, prompt: "Generate a case"}
    """)
    assert loaded.config.generation is not None and len(loaded.config.generation.seeds) == 3
    assert sum("'generation'" in w for w in loaded.warnings) == 1


@pytest.mark.parametrize(("generation", "needles"), [
    ("{strategy: random}", ["generation.strategy must be one of ['skill', 'synthetic', 'from-traces']"]),
    ("{strategy: synthetic}", ["generation.seeds is required (at least one seed) with strategy: synthetic"]),
    ("{strategy: synthetic, seeds: []}", ["generation.seeds is required"]),
    ("{seeds: [{category: c, count: 1, prompt: p}]}", ["generation.seeds are only used by strategy: synthetic"]),
    ("{strategy: from-traces, seeds: [{category: c, count: 1, prompt: p}]}", ["only used by strategy: synthetic"]),
    ("{strategy: synthetic, seeds: [{category: nav, count: 1}]}",
     ["generation.seeds[0] (seed 'nav') must set exactly one of builtin, prompt_file, prompt (sets none)"]),
    ("{strategy: synthetic, seeds: [{category: nav, count: 1, prompt: p, builtin: b}]}",
     ["generation.seeds[0] (seed 'nav')", "(sets builtin, prompt)"]),
    ("{strategy: synthetic, seeds: [{category: nav, prompt: p}]}", ["generation.seeds[0].count (seed 'nav') is required"]),
    ("{strategy: synthetic, seeds: [{category: nav, count: 0, prompt: p}]}",
     ["generation.seeds[0].count (seed 'nav') must be a whole number of at least 1"]),
    ("{strategy: synthetic, seeds: [{category: nav, count: '3', prompt: p}]}", ["generation.seeds[0].count"]),
    ("{strategy: synthetic, seeds: [{category: '', count: 1, prompt: p}]}",
     ["generation.seeds[0].category must not be empty"]),
    ("{strategy: synthetic, seeds: [{count: 1, prompt: p}]}", ["generation.seeds[0].category is required"]),
    ("{strategy: synthetic, seeds: [{category: c, count: 1, prompt_file: /abs.md}]}",
     ["generation.seeds[0].prompt_file (seed 'c')", "absolute"]),
])
def test_invalid_generation(write_eval, generation, needles):
    _refused(write_eval, f"generation: {generation}\n", *needles)


# --- thresholds ---------------------------------------------------------------------------

def test_a_bare_number_threshold_loads_gates_nothing_and_says_what_to_write(write_eval):
    loaded = _loads(write_eval, f"judges: [{{name: overall, check: \"{CHECK}\"}}]\nthresholds: {{overall: 0.6}}\n")
    assert loaded.config.thresholds == {}
    (warning,) = [w for w in loaded.warnings if "thresholds.overall" in w]
    assert "gates nothing" in warning and "{min_mean: 0.6}" in warning and "{min_pass_rate: 0.6}" in warning
    assert "ThresholdConfig" not in warning


@pytest.mark.parametrize("value", ["null", "high", "[0.5]", "true"])
def test_other_non_mapping_thresholds_also_gate_nothing(write_eval, value):
    loaded = _loads(write_eval, f"thresholds: {{j: {value}, k: {{min_mean: 3}}}}\n")
    assert list(loaded.config.thresholds) == ["k"]
    assert any("thresholds.j" in w and "gates nothing" in w for w in loaded.warnings)


def test_a_threshold_value_must_be_a_number(write_eval):
    _refused(write_eval, "thresholds: {j: {min_mean: high}}\n", "thresholds.j.min_mean must be a number (got 'high')")


# --- plain messages -----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "needle"), [
    ("execution: [a]", "execution must be a mapping (key: value lines)"),
    ("traces: {stdout: maybe}", "traces.stdout must be true or false (got 'maybe')"),
    ("judges: {name: a}", "judges must be a list"),
    ("execution: {timeout: 1.5}", "execution.timeout must be a whole number (got 1.5)"),
    ("sandbox: {gateway: {max_tokens: 100}}", "sandbox.gateway.max_tokens must be at least 2048 (got 100)"),
    ("sandbox: {gateway: {model: [x]}}", "sandbox.gateway.model is not a gateway setting"),
    ("permissions: {deny: [{tools: [Read]}]}", "permissions.deny[0]"),
    ("reward: [x]", "reward must be a mapping"),
    ("generation: x", "generation must be a mapping"),
])
def test_type_errors_are_plain_language(write_eval, text, needle):
    _refused(write_eval, text + "\n", needle)
