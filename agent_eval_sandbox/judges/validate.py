"""Load-time checks of `judges:` that need the judges package (called by the config loader).

Fails fast, as the reference does, on what would otherwise break mid-run:
an unknown builtin (the error lists every available `category/name`), a
builtin LLM judge given a non-bool feedback_type or a score_range, a check
snippet, `if` expression or prompt template that does not compile, a
prompt_file that does not exist. Returns warnings for what only looks wrong.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agent_eval_sandbox.config.models import EvalConfig, JudgeConfig
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.judges._worker import wrap_check
from agent_eval_sandbox.judges.condition import condition_syntax_error
from agent_eval_sandbox.judges.prompt import (
    missing_model_message,
    resolve_judge_model,
    resolve_path,
)
from agent_eval_sandbox.judges.registry import find_builtin, unknown_builtin_message
from agent_eval_sandbox.judges.template import template_syntax_error


def check_syntax_error(source: str) -> str | None:
    """Why a check snippet does not compile as a function body, or None."""
    try:
        compile(wrap_check(source), "<check>", "exec")
    except SyntaxError as exc:
        return f"the check snippet has a syntax error at line {(exc.lineno or 2) - 1}: {exc.msg}"
    return None


def _is_llm_builtin(judge: JudgeConfig, where: str, source: Path | None) -> bool:
    assert judge.builtin is not None
    entry = find_builtin(judge.builtin)
    if entry is None:
        raise ConfigError(unknown_builtin_message(judge.builtin), file=source, field=f"{where}.builtin")
    if entry.kind == "llm" and (judge.feedback_type not in (None, "bool") or judge.score_range is not None):
        raise ConfigError(
            f"builtin '{entry.qualified_name}' is an LLM judge with its own pass/fail contract; "
            "it takes no score_range and no feedback_type other than bool",
            file=source, field=where, fix="remove score_range / feedback_type",
        )
    return entry.kind == "llm"


def _llm_warnings(judge: JudgeConfig, where: str, root: Path | None, source: Path | None) -> list[str]:
    for key in ("llm_rubric", "prompt"):
        text = getattr(judge, key)
        problem = template_syntax_error(text) if text is not None else None
        if problem:
            raise ConfigError(problem, file=source, field=f"{where}.{key}")
    if root is None:
        return []
    if judge.llm_rubric is None and judge.prompt is None and judge.prompt_file:
        path = resolve_path(root, judge.prompt_file)
        if not path.is_file():
            raise ConfigError(f"prompt_file {path} not found", file=source, field=f"{where}.prompt_file",
                              fix="create it or correct the path (relative to eval.yaml's directory)")
    return [
        f"Judge '{judge.name}': context file {path} not found; it is left out of the prompt"
        for path in (resolve_path(root, entry) for entry in judge.context)
        if not path.is_file()
    ]


def validate_judges(
    config: EvalConfig,
    *,
    root: Path | None = None,
    source: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """Raise ConfigError for a judge that cannot run; return warnings.

    `root` is the project root (eval.yaml's directory) for prompt_file and
    context paths; without it those are not checked. `source` names eval.yaml
    in errors.
    """
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    for index, judge in enumerate(config.judges):
        where = f"judges[{index}]"
        if judge.name == "pairwise":
            continue
        kind = judge.kind
        calls_model = kind == "llm"
        if kind == "builtin":
            calls_model = _is_llm_builtin(judge, where, source)
            if not calls_model and judge.samples > 1:
                warnings.append(f"Judge '{judge.name}': samples is ignored for deterministic judges")
        elif kind == "check":
            problem = check_syntax_error(judge.check or "")
            if problem:
                raise ConfigError(problem, file=source, field=f"{where}.check")
        elif kind == "llm":
            warnings += _llm_warnings(judge, where, root, source)
        if judge.if_ is not None:
            problem = condition_syntax_error(judge.if_)
            if problem:
                raise ConfigError(problem, file=source, field=f"{where}.if")
        if calls_model and resolve_judge_model(judge, config, environ) is None:
            warnings.append(missing_model_message(judge.name) + "; until then every case errors for this judge")
    return warnings
