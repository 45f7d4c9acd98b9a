"""Run-time preflight (app/preflight.py) and the checks of app/validate.py, without Docker."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.app.preflight import preflight
from agent_eval_sandbox.app.validate import load_checked, plan_checked, refuse_warnings
from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.errors import ConfigError, StrictModeError, TemplateError, UserError

SKILL = "---\nname: scribe\ndescription: d\n---\nDo it.\n"
EVAL = """
name: pf
execution: {skill: scribe, arguments: "{task}"}
models: {skill: claude-sonnet-4-6}
dataset: {path: cases}
judges:
  - {name: ok, check: "return True, 'fine'"}
"""


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.write(".claude/skills/scribe/SKILL.md", SKILL)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def case(self, case_id: str, script: object = None, task: str = "go") -> Path:
        self.write(f"cases/{case_id}/input.yaml", yaml.safe_dump({"task": task}))
        if script is not None:
            self.write(f"cases/{case_id}/model_script.yaml", yaml.safe_dump(script, sort_keys=False))
        return self.root / "cases" / case_id

    def check(self, eval_text: str = EVAL, *, offline: bool = True, overrides: CliOverrides = CliOverrides()):
        loaded = load_checked(self.write("eval.yaml", eval_text))
        dataset = load_dataset(loaded)
        settings = resolve_run_settings(loaded.config, overrides, num_cases=len(dataset.cases))
        invocations = plan_checked(loaded, dataset.cases, settings)
        return loaded, dataset, preflight(loaded, dataset, invocations, offline=offline)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "p")


GOOD = [{"tool": "Bash", "input": {"command": "ls"}}, {"text": "done"}]


def test_a_sound_eval_has_nothing_to_say(project):
    project.case("c1", GOOD)
    project.case("c2", GOOD)
    loaded, dataset, checks = project.check()
    assert loaded.warnings == [] and dataset.warnings == [] and checks.warnings == []
    assert checks.checked == ["skill /scribe: .claude/skills/scribe/SKILL.md", "offline scripts: 2 parsed"]


def test_an_unknown_skill_stops_validate_and_run(project):
    project.case("c1", GOOD)
    with pytest.raises(ConfigError, match="execution.skill: no skill or command '/scrib' in the sandbox "
                                          r"\(did you mean 'scribe'\?\)"):
        project.check(EVAL.replace("skill: scribe", "skill: scrib"), offline=False)


def test_prompt_mode_has_no_skill_to_check(project):
    project.case("c1", GOOD)
    _, _, checks = project.check(EVAL.replace('skill: scribe, arguments: "{task}"', 'prompt: "/nothing {task}"'))
    assert checks.warnings == [] and not any(line.startswith("skill") for line in checks.checked)


def test_a_model_script_typo_names_the_case_the_step_and_the_key(project):
    project.case("c1", GOOD)
    project.case("c2", [{"text": "first"}, {"tol": "Bash", "input": {"command": "ls"}}, {"text": "done"}])
    with pytest.raises(ConfigError) as caught:
        project.check()
    text = caught.value.render()
    assert text.startswith(f"case c2: {project.root / 'cases/c2/model_script.yaml'}: steps[1] (step 2): "
                           "unknown key 'tol' (did you mean 'tool'?)")
    assert "\n" not in text


def test_scripts_are_only_parsed_offline(project):
    project.case("c1", [{"tol": "Bash"}])
    _, _, checks = project.check(offline=False)
    assert checks.warnings == [] and checks.checked == ["skill /scribe: .claude/skills/scribe/SKILL.md"]


def test_a_script_that_is_not_yaml_names_the_case_and_line(project):
    project.case("c1", GOOD)
    project.write("cases/c1/model_script.yaml", "- text: ok\n- tool: [unclosed\n")
    with pytest.raises(UserError, match=r"^case c1: .*model_script.yaml: invalid YAML at line \d"):
        project.check()


@pytest.mark.parametrize(
    ("rel", "label"),
    [
        ("cases/c1/hook_script.yaml", "case c1"),
        ("hook_script.yaml", "hook_script.yaml beside eval.yaml"),
        ("judge_script.yaml", "judge_script.yaml beside eval.yaml"),
    ],
)
def test_hook_and_judge_scripts_are_parsed_too(project, rel, label):
    project.case("c1", GOOD)
    project.write(rel, yaml.safe_dump([{"tool": "submit", "input": {"x": 1}, "usage": {"output_tokns": 3}}]))
    with pytest.raises(ConfigError) as caught:
        project.check()
    assert caught.value.render().startswith(f"{label}: {project.root / rel}: steps[0].usage (step 1): "
                                            "unknown key 'output_tokns' (did you mean 'output_tokens'?)")


def test_batch_mode_checks_the_datasets_model_script(project):
    project.case("a")
    project.case("b", [{"tol": "Bash"}])  # not used in batch mode: only the dataset's script is
    batch = EVAL.replace('arguments: "{task}"', 'mode: batch, arguments: "--input batch.yaml {task}"')
    _, _, checks = project.check(batch)
    assert checks.warnings == ["--offline: no model_script.yaml for batch; the scripted model only answers with a note"]
    project.write("cases/model_script.yaml", yaml.safe_dump([{"text": "x", "delay_s": -1}]))
    with pytest.raises(ConfigError, match=r"^batch: .*cases/model_script.yaml: steps\[0\].delay_s \(step 1\)"):
        project.check(batch)


def test_a_case_without_a_model_script_is_a_warning_offline(project):
    project.case("c1", GOOD)
    project.case("c2")
    _, _, checks = project.check()
    assert checks.warnings == ["--offline: no model_script.yaml for c2; the scripted model only answers with a note"]
    _, _, checks = project.check(offline=False)
    assert checks.warnings == []


def test_llm_judges_without_a_judge_script_are_a_warning_offline(project):
    project.case("c1", GOOD)
    llm = EVAL + "  - {name: tone, prompt: 'Is it polite?', feedback_type: bool}\n"
    _, _, checks = project.check(llm)
    assert checks.warnings == ["--offline: no judge_script.yaml beside eval.yaml: the LLM judges (tone) get an "
                               "error instead of a verdict"]
    project.write("judge_script.yaml", yaml.safe_dump([{"tool": "verdict", "input": {"passed": True}}]))
    _, _, checks = project.check(llm)
    assert checks.warnings == []


@pytest.mark.parametrize(
    ("rel", "text", "key"),
    [
        ("eval.yaml", EVAL + "name: again\n", "name"),
        ("cases/c1/input.yaml", "task: a\ntask: b\n", "task"),
        ("cases/c1/annotations.yaml", "expected: a\nexpected: b\n", "expected"),
        ("cases/c1/model_script.yaml", "- text: a\n  text: b\n", "[0].text"),
    ],
)
def test_duplicate_keys_are_warnings_naming_file_key_and_lines(project, rel, text, key):
    project.case("c1", GOOD)
    path = project.write(rel, text)
    _, _, checks = project.check(Path(project.root / "eval.yaml").read_text() if rel == "eval.yaml" else EVAL)
    assert len(checks.warnings) == 1
    assert checks.warnings[0].startswith(f"{path}: key '{key}' is written twice (lines ")


def test_zero_judges_is_always_a_warning(project):
    project.case("c1", GOOD)
    loaded, _, _ = project.check(EVAL.replace("judges:", "judgs:"))
    assert any("unknown key 'judgs' (did you mean 'judges'?)" in w for w in loaded.warnings)
    assert any(w.endswith("no judges: a run would check nothing and pass; add `judges:`")
               for w in loaded.warnings)


@pytest.mark.parametrize(
    ("eval_text", "overrides", "where"),
    [
        (EVAL, CliOverrides(), "{eval}: execution.arguments"),
        (EVAL.replace('skill: scribe, arguments: "{task}"', 'prompt: "{{ input.task }}"'), CliOverrides(),
         "{eval}: execution.prompt"),
        (EVAL, CliOverrides(skill_args="--x {task}"), "--skill-args"),
    ],
)
def test_a_template_error_names_the_case_input_the_template_and_eval_yaml(project, eval_text, overrides, where):
    project.case("c1", GOOD, task="go")
    project.write("cases/c2/input.yaml", "other: 1\n")
    with pytest.raises(TemplateError) as caught:
        project.check(eval_text, overrides=overrides)
    text = caught.value.render()
    eval_path = project.root / "eval.yaml"
    assert f"{project.root / 'cases/c2/input.yaml'}: case c2: Missing required field in template: task" in text
    assert f"(template: {where.format(eval=eval_path)})" in text


def test_batch_template_error_names_the_first_case(project):
    project.write("cases/a/input.yaml", "other: 1\n")
    project.case("b")
    batch = EVAL.replace('arguments: "{task}"', 'mode: batch, arguments: "{task}"')
    with pytest.raises(TemplateError, match=r"cases/a/input.yaml: batch \(first entry of batch.yaml\): "
                                            r"Missing required field in template: task \(template: .*eval.yaml: "
                                            r"execution.arg"):
        project.check(batch, offline=False)


def test_strict_refuses_any_warning_in_one_line():
    refuse_warnings([])
    with pytest.raises(StrictModeError) as caught:
        refuse_warnings(["eval.yaml: unknown key 'judgs'", "eval.yaml: no judges"])
    assert caught.value.render() == ("--strict: 2 warnings, the first: eval.yaml: unknown key 'judgs' — fix what "
                                     "each `warning:` line says, or run without --strict")


def test_a_model_script_calling_a_tool_the_cli_lacks_is_a_warning(project):
    project.case("c1", [{"tool_calls": [{"tool": "Bsh", "input": {}}, {"tool": "mcp__jira__create"}]},
                        {"tool": "Grep", "input": {}}, {"tool": "AskUserQuestion", "input": {}}, {"text": "done"}])
    _, _, checks = project.check()
    script = project.root / "cases/c1/model_script.yaml"
    assert checks.warnings == [
        f"case c1: {script}: steps[0] (step 1): tool 'Bsh' (did you mean 'Bash'?) is not a tool of Claude Code "
        "2.1.332: the CLI answers the call with 'No such tool available'",
        f"case c1: {script}: steps[1] (step 2): tool 'Grep' is not a tool of Claude Code 2.1.332: the CLI answers "
        "the call with 'No such tool available'",
    ]
    # The list is of one CLI version: with another, the names are not judged.
    _, _, checks = project.check(EVAL + "sandbox: {claude_version: 2.2.0}\n")
    assert checks.warnings == []


def test_hook_and_judge_scripts_call_tools_of_their_own(project):
    project.case("c1", GOOD)
    project.write("judge_script.yaml", yaml.safe_dump([{"tool": "submit_score", "input": {"score": 1}}]))
    project.write("hook_script.yaml", yaml.safe_dump([{"tool": "answer", "input": {"a": 1}}]))
    assert project.check()[2].warnings == []


def test_the_measured_lists_are_of_the_default_cli_version():
    """Bumping the image's Claude Code version means measuring its commands and tools again (app/claude_cli.py)."""
    from agent_eval_sandbox.app.claude_cli import MEASURED_VERSION
    from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION

    assert MEASURED_VERSION == DEFAULT_CLAUDE_VERSION


AGENT_JUDGE = EVAL + "  - {name: grader, llm_rubric: 'Grade it.', samples: 2, agent: {allowed_tools: [Bash]}}\n"


def test_agent_judge_scripts_are_parsed_and_a_missing_one_is_a_warning(project):
    project.case("c1", GOOD)
    project.case("c2", GOOD)
    eval_text = AGENT_JUDGE
    _, _, checks = project.check(eval_text)
    assert checks.warnings == ["--offline: no judge_scripts/<judge>.yaml plays agent judge grader on c1, grader on c1 "
                               "(sample 2), grader on c2, grader on c2 (sample 2): that judge errors on that case"]
    # one for every sample and case beside eval.yaml; sample 2 of c2 has its own, in the case's directory
    project.write("judge_scripts/grader.yaml", yaml.safe_dump(GOOD))
    project.write("cases/c2/judge_scripts/grader.2.yaml", yaml.safe_dump([{"text": "x", "delay_s": -1}]))
    with pytest.raises(ConfigError) as caught:
        project.check(eval_text)
    where = project.root / "cases/c2/judge_scripts/grader.2.yaml"
    assert caught.value.render().startswith(f"agent judge 'grader': {where}: steps[0].delay_s (step 1)")
    project.write("cases/c2/judge_scripts/grader.2.yaml", yaml.safe_dump([{"tool": "Bsh", "input": {}}]))
    _, _, checks = project.check(eval_text)
    assert len(checks.warnings) == 1 and "agent judge 'grader'" in checks.warnings[0], checks.warnings
    assert "tool 'Bsh' (did you mean 'Bash'?)" in checks.warnings[0]
    assert "offline scripts: 4 parsed" in checks.checked
