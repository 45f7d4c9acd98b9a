"""LLM judge prompts: compiling, template variables, model resolution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_eval_sandbox.config.models import EvalConfig, JudgeConfig
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.judges.prompt import (
    JudgePromptError,
    compile_prompt,
    resolve_judge_model,
)
from agent_eval_sandbox.judges.template import PromptRenderError, render_prompt
from tests.unit.judges.rundir_fixture import assistant, result_event, tool

RECORD: dict[str, Any] = {
    "files": {"artifacts/b.md": "B body", "artifacts/a.md": "A body", "artifacts/x.png": {"_binary": True, "path": "/p/x.png", "name": "x.png"}},
    "annotations": {"tier": "gold", "category": "nav"},
    "inputs": {"prompt": "Write a report", "options": {"depth": 2}},
    "conversation": "Here is the report.",
    "events": [assistant("Here is the report.", [tool("Read", "t1", file_path="/ws/docs/a.md")], thinking="I should read a.md"),
               result_event(cost=0.1, turns=1)],
    "cost_usd": 0.1,
}


def _render(template: str, arguments: dict[str, Any] | None = None) -> str:
    return render_prompt(template, RECORD, arguments or {})


def test_outputs_renders_files_as_markdown_and_allows_access() -> None:
    assert _render("{{ outputs }}") == "\n### artifacts/a.md\n\nA body\n\n### artifacts/b.md\n\nB body\n\n### artifacts/x.png\n\n<binary: x.png>\n"
    assert _render("{{ outputs.files['artifacts/a.md'] }}|{{ outputs.cost_usd }}|{{ outputs['cost_usd'] }}") == "A body|0.1|0.1"


def test_annotations_render_as_text_and_allow_get() -> None:
    assert _render("{{ annotations }}") == "- **category**: nav\n- **tier**: gold\n"
    assert _render("{{ annotations.get('tier') }} {{ annotations.category }}") == "gold nav"


def test_conversation_reasoning_tool_trace_inputs_evidence_arguments() -> None:
    assert _render("{{ conversation }}") == "Here is the report."
    assert _render("{{ reasoning }}") == "[thinking]\nI should read a.md\n\nHere is the report."
    assert _render("{{ tool_trace }}") == "1. Read: /ws/docs/a.md"
    assert _render("{{ inputs }}") == "**prompt**: Write a report\n\n**options**: depth: 2"
    assert "Files read: a.md" in _render("{{ evidence }}")
    assert _render("{{ arguments.strictness }}-{{ arguments['n'] }}", {"strictness": "high", "n": 2}) == "high-2"


def test_unknown_variables_render_empty_and_tojson_works() -> None:
    assert _render("[{{ outputs.response }}][{{ nothing }}]") == "[][]"
    assert _render("{{ annotations | tojson }}") == '{\n  "tier": "gold",\n  "category": "nav"\n}'


def test_untrusted_values_are_substituted_not_executed() -> None:
    record = {**RECORD, "conversation": "{{ 7 * 7 }} {% for x in y %}"}
    assert render_prompt("{{ conversation }}", record, {}) == "{{ 7 * 7 }} {% for x in y %}"


def test_render_failures_are_errors_for_that_case() -> None:
    with pytest.raises(PromptRenderError, match="failed to render"):
        _render("{{ outputs.files['nope'].upper() }}")
    with pytest.raises(PromptRenderError):
        _render("{% for %}")


def _judge(**fields: Any) -> JudgeConfig:
    return JudgeConfig.model_validate({"name": "q", **fields})


def test_llm_rubric_wraps_conversation_unless_referenced(tmp_path: Path) -> None:
    assert compile_prompt(_judge(llm_rubric="Cited sources?"), _at(tmp_path)) == "Cited sources?\n\n# Agent Response to Evaluate\n\n{{ conversation }}"
    assert compile_prompt(_judge(llm_rubric="Judge {{conversation}} now"), _at(tmp_path)) == "Judge {{conversation}} now"


def _at(root: Path) -> ProjectPaths:
    return ProjectPaths(config_dir=root, workdir=root)


def test_priority_is_rubric_then_prompt_then_file_and_context_is_appended(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts/judge.md").write_text("From file {{ outputs }}")
    (tmp_path / "guide.md").write_text("Be strict.")
    assert compile_prompt(_judge(llm_rubric="R", prompt="P", prompt_file="prompts/judge.md"), _at(tmp_path)).startswith("R\n")
    assert compile_prompt(_judge(prompt="P", prompt_file="prompts/judge.md"), _at(tmp_path)) == "P"
    with_context = compile_prompt(_judge(prompt_file="prompts/judge.md", context=["guide.md", "missing.md"]), _at(tmp_path))
    assert with_context == "From file {{ outputs }}\n\n## Context: guide.md\n\nBe strict."
    absolute = compile_prompt(_judge(prompt_file=str(tmp_path / "prompts/judge.md")), _at(Path("/nowhere")))
    assert absolute == "From file {{ outputs }}"


def test_an_unreadable_prompt_file_is_a_prompt_error(tmp_path: Path) -> None:
    with pytest.raises(JudgePromptError, match="prompt_file .*nope.md is not found"):
        compile_prompt(_judge(prompt_file="nope.md"), _at(tmp_path))


def test_judge_model_precedence() -> None:
    config = EvalConfig.model_validate({"models": {"judge": "from-config"}})
    bare = EvalConfig()
    env = {"EVAL_JUDGE_MODEL": "from-env"}
    assert resolve_judge_model(_judge(prompt="p", model="own"), config, env) == "own"
    assert resolve_judge_model(_judge(prompt="p"), config, env) == "from-config"
    assert resolve_judge_model(_judge(prompt="p"), bare, env) == "from-env"
    assert resolve_judge_model(_judge(prompt="p", model="  "), bare, {}) is None
