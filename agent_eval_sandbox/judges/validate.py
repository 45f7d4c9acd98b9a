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
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.judges._worker import wrap_check
from agent_eval_sandbox.judges.condition import condition_syntax_error
from agent_eval_sandbox.judges.prompt import missing_model_message, resolve_judge_model
from agent_eval_sandbox.judges.registry import find_builtin, unknown_builtin_message
from agent_eval_sandbox.judges.template import template_syntax_error


def check_syntax_error(source: str) -> str | None:
    """Why a check snippet does not compile as a function body, or None."""
    try:
        compile(wrap_check(source), "<check>", "exec")
    except SyntaxError as exc:
        return f"the check snippet has a syntax error at line {(exc.lineno or 2) - 1}: {exc.msg}"
    return None


def _where(index: int, judge: JudgeConfig, key: str | None = None) -> str:
    """The field of judges[index] and the judge's name, as errors name them."""
    return f"judges[{index}]{'.' + key if key else ''} (judge {judge.name!r})"


def _is_llm_builtin(judge: JudgeConfig, index: int, source: Path | None) -> bool:
    assert judge.builtin is not None
    entry = find_builtin(judge.builtin)
    if entry is None:
        raise ConfigError(unknown_builtin_message(judge.builtin), file=source, field=_where(index, judge, "builtin"))
    if entry.kind == "llm" and (judge.feedback_type not in (None, "bool") or judge.score_range is not None):
        raise ConfigError(
            f"builtin '{entry.qualified_name}' is an LLM judge with its own pass/fail contract; "
            "it takes no score_range and no feedback_type other than bool",
            file=source, field=_where(index, judge), fix="remove score_range / feedback_type",
        )
    return entry.kind == "llm"


def _llm_warnings(judge: JudgeConfig, index: int, paths: ProjectPaths | None, source: Path | None) -> list[str]:
    for key in ("llm_rubric", "prompt"):
        text = getattr(judge, key)
        problem = template_syntax_error(text) if text is not None else None
        if problem:
            raise ConfigError(problem, file=source, field=_where(index, judge, key))
    if paths is None:
        return []
    if judge.llm_rubric is None and judge.prompt is None and judge.prompt_file:
        path = paths.project_file(judge.prompt_file)
        if not path.is_file():
            looked = ", ".join(str(p) for p in paths.project_file_candidates(judge.prompt_file))
            raise ConfigError(
                f"prompt_file {judge.prompt_file!r} not found (looked for {looked})", file=source,
                field=_where(index, judge, "prompt_file"),
                fix="create it or correct the path (relative to the working directory, as in the reference, "
                    "or to eval.yaml's directory)",
            )
    return [
        f"Judge '{judge.name}': context file {path} not found; it is left out of the prompt"
        for path in (paths.project_file(entry) for entry in judge.context)
        if not path.is_file()
    ]


def _agent_context_warnings(judge: JudgeConfig, paths: ProjectPaths | None) -> list[str]:
    if paths is None or judge.agent is None:
        return []
    return [
        f"Judge '{judge.name}': agent.context entry {path} not found; nothing is staged for it"
        for path in (paths.project_file(entry) for entry in judge.agent.context)
        if not path.exists()
    ]


def validate_judges(
    config: EvalConfig,
    *,
    paths: ProjectPaths | None = None,
    source: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """Raise ConfigError for a judge that cannot run; return warnings.

    `paths` says where prompt_file, context and agent.context resolve
    (`LoadedConfig.paths`); without it those are not checked. `source` names
    eval.yaml in errors, which name the judge by its index and its name.
    """
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    for index, judge in enumerate(config.judges):
        if judge.name == "pairwise":
            continue
        kind = judge.kind
        calls_model = kind in ("llm", "agent")
        if kind == "builtin":
            calls_model = _is_llm_builtin(judge, index, source)
            if not calls_model and judge.samples > 1:
                warnings.append(f"Judge '{judge.name}': samples is ignored for deterministic judges")
        elif kind == "check":
            problem = check_syntax_error(judge.check or "")
            if problem:
                raise ConfigError(problem, file=source, field=_where(index, judge, "check"))
        elif kind in ("llm", "agent"):
            warnings += _llm_warnings(judge, index, paths, source)
            warnings += _agent_context_warnings(judge, paths)
        if judge.if_ is not None:
            problem = condition_syntax_error(judge.if_)
            if problem:
                raise ConfigError(problem, file=source, field=_where(index, judge, "if"))
        if calls_model and resolve_judge_model(judge, config, environ) is None:
            warnings.append(missing_model_message(judge.name) + "; until then every case errors for this judge")
    return warnings
