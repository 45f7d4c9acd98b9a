"""What the broker decides for one PreToolUse event, exactly as the reference hook does.

Pure: the event, the handlers, the case context, the case's configured
environment and an answerer (the only call out, for tier 2) in; a `Decision`
out. The first matching handler wins:

- AskUserQuestion: each question is answered in three tiers — the exact text
  in `case_overrides`; the hook model given the question, its options, the
  handler prompt and the case context, its reply resolved to an option label
  (exact, then case-insensitive); the first option, or "yes". The call is
  allowed with `updatedInput: {questions, answers}`.
- Bash matches a handler only when "Bash" is in its patterns and one of its
  `input_filters` matches the command (case-insensitive). A Bash handler
  without filters would deny every command: it is skipped with a warning.
- Any other tool matches by pattern (exact name or trailing-`*` glob).
- A matched tool with `env_checks` is allowed when every variable's
  lowercased value contains one of its `must_contain` substrings (no opinion
  is printed then: the CLI's own permissions decide), else denied; a matched
  tool without env_checks is denied.
- No handler: pass through (no output).

`env` is the environment the host configured for the case, not the
container's: the agent cannot change what the checks see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from agent_eval_sandbox.config.dataset import ANSWERS_NAMES, INPUT_NAMES
from agent_eval_sandbox.interception.handlers import (
    ASK_USER_QUESTION,
    Handler,
    OverrideEntry,
    ToolHandlers,
    pattern_matches,
)

FALLBACK_ANSWER = "yes"
# The CLI's AskUserQuestion takes 1-4 questions of 2-4 options (2.1.332); a forged
# event on the broker's socket can hold anything, and a question can cost a
# hook-model call. Twice the tool's own counts leaves room for a newer CLI.
MAX_QUESTIONS = 8
MAX_OPTIONS = 8
# A call whose questions (as JSON) are larger is denied: the CLI's are a few hundred bytes.
MAX_QUESTIONS_JSON_CHARS = 64 * 1024
# Beyond these sizes a question is not sent to the hook model (tier 3 answers it).
MAX_QUESTION_CHARS = 4096
MAX_LABEL_CHARS = 1024
MAX_DESCRIPTION_CHARS = 4096
# What the hook model reads, under the names the reference labels them with.
CASE_CONTEXT_FILES = (("input.yaml", INPUT_NAMES), ("answers.yaml", ANSWERS_NAMES))

DecisionKind = Literal["allow", "deny", "pass"]
Tier = Literal["override", "llm", "fallback"]


class MalformedEvent(ValueError):
    """The hook input is not a PreToolUse event the broker can decide on."""


@dataclass(frozen=True)
class ToolEvent:
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str | None = None
    session_id: str | None = None

    @classmethod
    def from_payload(cls, payload: Any) -> ToolEvent:
        if not isinstance(payload, dict):
            raise MalformedEvent(f"the hook input is a {type(payload).__name__}, not a JSON object")
        tool_name = payload.get("tool_name")
        if not isinstance(tool_name, str) or not tool_name:
            raise MalformedEvent("the hook input has no tool_name")
        tool_input = payload.get("tool_input", {})
        if not isinstance(tool_input, dict):
            raise MalformedEvent("the hook input's tool_input is not a JSON object")
        tool_use_id, session_id = payload.get("tool_use_id"), payload.get("session_id")
        return cls(
            tool_name=tool_name,
            tool_input=tool_input,
            tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
            session_id=session_id if isinstance(session_id, str) else None,
        )


@dataclass(frozen=True)
class CaseContext:
    """The case files the hook model reads (raw text, as the reference sends them)."""

    files: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_case_dir(cls, case_dir: Path) -> CaseContext:
        files: list[tuple[str, str]] = []
        for label, names in CASE_CONTEXT_FILES:
            for name in names:
                path = case_dir / name
                if path.is_file():
                    files.append((label, path.read_text(encoding="utf-8", errors="replace")))
                    break
        return cls(tuple(files))

    def render(self) -> str:
        return "".join(f"\n--- {name} ---\n{text}\n" for name, text in self.files)


@dataclass(frozen=True)
class Option:
    label: str
    description: str = ""


@dataclass(frozen=True)
class AnswerRequest:
    question: str
    options: tuple[Option, ...]
    handler_prompt: str
    case_context: str
    model: str


# Returns the hook model's raw reply; raising means "no answer" (tier 3 follows).
Answerer = Callable[[AnswerRequest], str]


@dataclass(frozen=True)
class QuestionAnswer:
    question: str
    answer: str
    tier: Tier
    options: tuple[str, ...] = ()
    source: str | None = None  # tier 1: "human" or "agent", as the reference records it
    model: str | None = None
    match: Literal["exact", "fuzzy"] | None = None
    llm_raw: str | None = None
    error: str | None = None

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Decision:
    kind: DecisionKind
    reason: str = ""
    handler_index: int | None = None
    handler_match: str | None = None
    answers: tuple[QuestionAnswer, ...] = ()
    updated_input: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()

    def hook_output(self) -> dict[str, Any] | None:
        """What the hook prints: an allow with the answers, a deny with its reason, or nothing."""
        if self.kind == "deny":
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": self.reason,
                }
            }
        if self.kind == "allow" and self.updated_input is not None:
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "updatedInput": self.updated_input,
                }
            }
        return None


def deny(reason: str, **details: Any) -> Decision:
    return Decision(kind="deny", reason=reason, **details)


def misconfigured_bash_warning(handler: Handler) -> str:
    return (
        f"tool_handlers.yaml: handler {handler.label!r} has 'Bash' in patterns but no input_filters "
        "— skipping it (it would deny every Bash command); add input_filters "
        "(agent-eval-sandbox compile-handlers --llm, or by hand)"
    )


def find_handler(event: ToolEvent, handlers: ToolHandlers) -> tuple[int | None, list[str]]:
    """The index of the first handler the call matches (or None), and any warnings."""
    warnings: list[str] = []
    for index, handler in enumerate(handlers.handlers):
        if event.tool_name == "Bash" and "Bash" in handler.patterns:
            if not handler.input_filters:
                warnings.append(misconfigured_bash_warning(handler))
                continue
            command = event.tool_input.get("command")
            text = command if isinstance(command, str) else ""
            if any(re.search(f, text, re.IGNORECASE) for f in handler.input_filters):
                return index, warnings
            continue  # "Bash" names this handler, but the command is not one it gates
        if any(pattern_matches(p, event.tool_name) for p in handler.patterns):
            return index, warnings
    return None, warnings


def env_check_failure(handler: Handler, env: Mapping[str, str]) -> str | None:
    """Why the env checks fail (the first failing variable), or None when all pass."""
    for name, check in handler.env_checks.items():
        value = env.get(name, "")
        if check.must_contain and not any(m in value.lower() for m in check.must_contain):
            return f"Env {name}='{value}' doesn't match required: {check.must_contain}"
    return None


def resolve_label(reply: str, labels: list[str]) -> tuple[str, Literal["exact", "fuzzy"]] | None:
    """The option label a model reply names: verbatim, else case-insensitively without quotes."""
    answer = reply.strip()
    if answer in labels:
        return answer, "exact"
    folded = answer.lower().strip("\"'")
    for label in labels:
        if label.lower() == folded:
            return label, "fuzzy"
    return None


def _options(question: dict[str, Any]) -> tuple[Option, ...]:
    raw = question.get("options")
    if not isinstance(raw, list):
        return ()
    return tuple(
        Option(label=str(o.get("label", "")), description=str(o.get("description", "") or ""))
        for o in raw
        if isinstance(o, dict)
    )


def _override(handlers: ToolHandlers, question: str) -> tuple[str, str] | None:
    """Tier 1: the exact question text in case_overrides, with its provenance."""
    entry = handlers.case_overrides.get(question)
    default_source = "human" if handlers.case_overrides_source == "human" else "agent"
    if isinstance(entry, OverrideEntry):
        if entry.answer is None:
            return None
        return entry.answer, "human" if entry.source == "human" else "agent"
    if entry is None:
        return None
    return entry, default_source


def too_large_for_the_model(question: str, options: tuple[Option, ...]) -> str | None:
    """Why a question is not sent to the hook model, or None."""
    if len(question) > MAX_QUESTION_CHARS:
        return f"the question has {len(question)} characters (at most {MAX_QUESTION_CHARS} go to the hook model)"
    if len(options) > MAX_OPTIONS:
        return f"the question has {len(options)} options (at most {MAX_OPTIONS} go to the hook model)"
    for option in options:
        if len(option.label) > MAX_LABEL_CHARS or len(option.description) > MAX_DESCRIPTION_CHARS:
            return (f"an option's label or description is over {MAX_LABEL_CHARS} or {MAX_DESCRIPTION_CHARS} "
                    "characters")
    return None


def _answer_one(
    question: str,
    options: tuple[Option, ...],
    handler: Handler,
    handlers: ToolHandlers,
    case: CaseContext,
    answerer: Answerer | None,
) -> QuestionAnswer:
    labels = tuple(o.label for o in options)
    override = _override(handlers, question)
    if override is not None:
        return QuestionAnswer(question, override[0], "override", labels, source=override[1])
    model = handlers.hook_model or ""
    llm: dict[str, Any] = {}
    oversize = too_large_for_the_model(question, options)
    if oversize is not None and options and answerer is not None:
        llm = {"model": model, "error": f"not asked: {oversize}"}
    elif options and answerer is not None:
        llm["model"] = model
        try:
            reply = answerer(AnswerRequest(question, options, handler.prompt, case.render(), model))
        except Exception as exc:  # tier 3 takes over; the error is recorded
            llm["error"] = f"{type(exc).__name__}: {exc}"[:500]
        else:
            resolved = resolve_label(reply, list(labels))
            if resolved is not None:
                return QuestionAnswer(question, resolved[0], "llm", labels, model=model, match=resolved[1])
            llm["llm_raw"] = reply[:500]
    fallback = options[0].label if options else FALLBACK_ANSWER
    return QuestionAnswer(question, fallback, "fallback", labels, **llm)


def _short(text: str, limit: int = 200) -> str:
    """A sandbox-chosen text as it may appear in a warning on the controller's terminal."""
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text)} chars]"


def answer_questions(
    event: ToolEvent,
    index: int,
    handlers: ToolHandlers,
    case: CaseContext,
    answerer: Answerer | None,
) -> Decision:
    handler = handlers.handlers[index]
    details: dict[str, Any] = {"handler_index": index, "handler_match": handler.match}
    questions = event.tool_input.get("questions")
    if not isinstance(questions, list) or not all(isinstance(q, dict) for q in questions):
        return deny("AskUserQuestion input has no list of questions to answer", **details)
    if len(questions) > MAX_QUESTIONS:
        return deny(f"AskUserQuestion input has {len(questions)} questions; at most {MAX_QUESTIONS} are answered",
                    **details)
    size = len(json.dumps(questions, default=str))
    if size > MAX_QUESTIONS_JSON_CHARS:
        return deny(f"AskUserQuestion input is {size} characters of questions; at most {MAX_QUESTIONS_JSON_CHARS} "
                    "are answered", **details)
    answered: list[QuestionAnswer] = []
    warnings: list[str] = []
    for raw in questions:
        text = raw.get("question", "")
        text = text if isinstance(text, str) else str(text)
        answer = _answer_one(text, _options(raw), handler, handlers, case, answerer)
        if answer.tier == "fallback":
            # Tiers 1 and 2 answer for this case; landing here hands the agent an arbitrary answer.
            warnings.append(
                f"AskUserQuestion fallback: no case override and no LLM answer for {_short(text)!r} "
                f"— defaulting to {_short(answer.answer)!r}"
            )
        answered.append(answer)
    updated = {"questions": questions, "answers": {a.question: a.answer for a in answered}}
    tiers = ", ".join(a.tier for a in answered) or "no questions"
    return Decision(
        kind="allow",
        reason=f"answered by handler {handler.label!r} ({tiers})",
        answers=tuple(answered),
        updated_input=updated,
        warnings=tuple(warnings),
        **details,
    )


def decide(
    event: ToolEvent,
    handlers: ToolHandlers,
    case: CaseContext,
    env: Mapping[str, str],
    answerer: Answerer | None,
) -> Decision:
    index, warnings = find_handler(event, handlers)
    if index is None:
        return Decision(kind="pass", reason="no handler matches", warnings=tuple(warnings))
    handler = handlers.handlers[index]
    if event.tool_name == ASK_USER_QUESTION:
        decision = answer_questions(event, index, handlers, case, answerer)
        return replace(decision, warnings=(*warnings, *decision.warnings))
    details: dict[str, Any] = {"handler_index": index, "handler_match": handler.match, "warnings": tuple(warnings)}
    if handler.env_checks:
        failure = env_check_failure(handler, env)
        if failure is not None:
            return deny(failure, **details)
        # The reference exits 0 here: no opinion, so the CLI's own permissions still apply.
        return Decision(kind="allow", reason="env checks passed", **details)
    return deny(f"Blocked by eval harness: {handler.match or 'matched handler'}", **details)
