"""LLM judge prompts: which template a judge uses, and which model judges (pure but for file reads)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from agent_eval_sandbox.config.models import EvalConfig, JudgeConfig
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.errors import UserError

_CONVERSATION_VAR = re.compile(r"\{\{\s*conversation\s*\}\}")
RUBRIC_SUFFIX = "\n\n# Agent Response to Evaluate\n\n{{ conversation }}"


class JudgePromptError(UserError):
    """An LLM judge's prompt_file (or a context file) cannot be read."""


def _read_prompt_file(path: Path, what: str, judge: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = "not found" if isinstance(exc, FileNotFoundError) else f"unreadable ({exc})"
        raise JudgePromptError(f"judge '{judge}': {what} {path} is {reason}", fix=f"fix judges[].{what}") from None


def compile_prompt(judge: JudgeConfig, paths: ProjectPaths, *, agent: bool = False) -> str:
    """The judge's template: llm_rubric, else prompt, else prompt_file; then `context` files.

    An LLM judge's llm_rubric gets `{{ conversation }}` appended unless it already uses it; an
    agent judge's (`agent`) is used as is: it reads its staged files, not an inlined conversation.
    Context files become `## Context: <name>` sections (a missing one is left
    out, as in the reference; the loader warns about it). Both resolve as
    `ProjectPaths.project_file` says.
    """
    if judge.llm_rubric is not None:
        template = judge.llm_rubric
        if not agent and not _CONVERSATION_VAR.search(template):
            template += RUBRIC_SUFFIX
    elif judge.prompt is not None:
        template = judge.prompt
    elif judge.prompt_file is not None:
        template = _read_prompt_file(paths.project_file(judge.prompt_file), "prompt_file", judge.name)
    else:
        raise JudgePromptError(f"judge '{judge.name}' has no llm_rubric, prompt or prompt_file")
    for entry in judge.context:
        path = paths.project_file(entry)
        if path.is_file():
            template += f"\n\n## Context: {path.name}\n\n{_read_prompt_file(path, 'context', judge.name)}"
    return template


def resolve_judge_model(judge: JudgeConfig, config: EvalConfig, environ: Mapping[str, str]) -> str | None:
    """Per-judge `model`, else `models.judge`, else $EVAL_JUDGE_MODEL; None if none is set."""
    for candidate in (judge.model, config.models.judge, environ.get("EVAL_JUDGE_MODEL")):
        if candidate and candidate.strip():
            return candidate.strip()
    return None


def missing_model_message(judge_name: str) -> str:
    return (
        f"no model for LLM judge '{judge_name}': set `model:` on the judge, `models.judge` in eval.yaml, "
        "or the EVAL_JUDGE_MODEL environment variable"
    )
