"""Load-time validation of judges (`validate_judges`, called by the config loader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.judges.validate import validate_judges

MODEL_ENV = {"EVAL_JUDGE_MODEL": "claude-test"}


def _config(*judges: dict[str, Any], **extra: Any) -> EvalConfig:
    return EvalConfig.model_validate({"name": "t", "judges": list(judges), **extra})


def test_a_valid_set_of_judges_passes_quietly(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts/q.md").write_text("Score {{ outputs }}")
    config = _config(
        {"name": "a", "builtin": "cost_budget"},
        {"name": "b", "builtin": "quality/output_completeness"},
        {"name": "c", "check": "return True, 'ok'", "if": "annotations.get('x')"},
        {"name": "d", "prompt_file": "prompts/q.md", "score_range": [1, 5]},
        {"name": "e", "module": "m", "function": "f"},
    )
    assert validate_judges(config, paths=ProjectPaths(config_dir=tmp_path, workdir=tmp_path), environ=MODEL_ENV) == []


def test_unknown_builtin_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError) as info:
        validate_judges(_config({"name": "a", "builtin": "cost_budgt"}), source=Path("eval.yaml"))
    message = str(info.value)
    assert message.startswith("eval.yaml: judges[0].builtin (judge 'a'): unknown builtin judge 'cost_budgt'")
    assert "efficiency/cost_budget" in message and "safety/no_harmful_content" in message


def test_category_mismatch_is_rejected() -> None:
    with pytest.raises(ConfigError, match="in category 'efficiency', not 'quality'"):
        validate_judges(_config({"name": "a", "builtin": "quality/cost_budget"}))


@pytest.mark.parametrize("extra", [{"score_range": [1, 5]}, {"feedback_type": "int"}])
def test_builtin_llm_judges_take_no_scale(extra: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="own pass/fail contract"):
        validate_judges(_config({"name": "a", "builtin": "no_harmful_content", **extra}), environ=MODEL_ENV)


def test_builtin_python_judges_may_be_numeric_but_samples_warn() -> None:
    warnings = validate_judges(_config({"name": "a", "builtin": "cost_budget", "score_range": [0, 1], "samples": 3}))
    assert warnings == ["Judge 'a': samples is ignored for deterministic judges"]


def test_syntax_errors_fail_at_load() -> None:
    with pytest.raises(ConfigError, match=r"judges\[0\]\.check \(judge 'a'\): the check snippet has a syntax error at line 2"):
        validate_judges(_config({"name": "a", "check": "x = 1\nreturn (True,"}))
    with pytest.raises(ConfigError, match=r"judges\[0\]\.if \(judge 'a'\): invalid Python expression"):
        validate_judges(_config({"name": "a", "check": "return True, ''", "if": "annotations.get('x') =="}))
    with pytest.raises(ConfigError, match=r"judges\[0\]\.prompt \(judge 'a'\): invalid Jinja2 template at line 1"):
        validate_judges(_config({"name": "a", "prompt": "Score {{ outputs ", "score_range": [1, 5]}), environ=MODEL_ENV)


def test_missing_prompt_file_fails_and_missing_context_warns(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"judges\[0\]\.prompt_file \(judge 'a'\): prompt_file 'nope\.md' not found \(looked for .*nope\.md\)"):
        validate_judges(_config({"name": "a", "prompt_file": "nope.md"}), paths=ProjectPaths(config_dir=tmp_path, workdir=tmp_path), environ=MODEL_ENV)
    warnings = validate_judges(_config({"name": "a", "prompt": "x", "context": ["ctx.md"]}), paths=ProjectPaths(config_dir=tmp_path, workdir=tmp_path), environ=MODEL_ENV)
    assert len(warnings) == 1 and "context file" in warnings[0] and "ctx.md" in warnings[0]


def test_an_llm_judge_without_a_model_warns_what_to_set() -> None:
    warnings = validate_judges(_config({"name": "a", "llm_rubric": "ok?"}, {"name": "b", "builtin": "no_harmful_content"}), environ={})
    assert len(warnings) == 2
    assert "set `model:` on the judge, `models.judge` in eval.yaml, or the EVAL_JUDGE_MODEL environment variable" in warnings[0]
    assert validate_judges(_config({"name": "a", "llm_rubric": "ok?"}, models={"judge": "m"}), environ={}) == []
    assert validate_judges(_config({"name": "a", "llm_rubric": "ok?", "model": "m"}), environ={}) == []


def test_pairwise_is_not_validated_here() -> None:
    config = _config({"name": "pairwise", "prompt": "{{ broken"}, {"name": "x", "agent": {}, "prompt": "y"})
    assert validate_judges(config, environ=MODEL_ENV) == []


def test_agent_judges_are_checked_like_llm_judges(tmp_path: Path) -> None:
    """Their instructions are an LLM judge's: the template must compile, the prompt_file exist, a model resolve."""
    with pytest.raises(ConfigError, match=r"judges\[0\]\.prompt \(judge 'x'\): invalid Jinja2"):
        validate_judges(_config({"name": "x", "agent": {}, "prompt": "{{ broken"}), environ=MODEL_ENV)
    where = ProjectPaths(config_dir=tmp_path, workdir=tmp_path)
    with pytest.raises(ConfigError, match=r"judges\[0\]\.prompt_file \(judge 'x'\)"):
        validate_judges(_config({"name": "x", "agent": {}, "prompt_file": "nope.md"}), paths=where, environ=MODEL_ENV)
    warnings = validate_judges(_config({"name": "x", "agent": {"context": ["docs/"]}, "prompt": "y"}), paths=where,
                               environ={})
    assert any("agent.context entry" in w and "docs" in w for w in warnings)
    assert any("no model for LLM judge 'x'" in w for w in warnings)
