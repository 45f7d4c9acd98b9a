"""Planning: what each invocation will run, before anything is started (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_eval_sandbox.config.dataset import Case
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.config.templating import render_template
from agent_eval_sandbox.errors import TemplateError


@dataclass(frozen=True)
class Invocation:
    """One `claude -p` run: a case (case mode) or all cases (batch mode)."""

    id: str
    cases: tuple[Case, ...]
    prompt: str  # what goes to the CLI's stdin
    arguments: str  # the rendered template (skill arguments or the prompt itself)
    batch_entries: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    case_order: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def compose_prompt(config: EvalConfig, rendered: str) -> str:
    """Skill mode sends `/skill args`; prompt mode sends the rendered prompt."""
    if config.execution.skill:
        return f"/{config.execution.skill} {rendered}".strip()
    return rendered


def render_for_case(template: str, case: Case) -> str:
    try:
        return render_template(template, case.input)
    except TemplateError as exc:
        raise TemplateError(f"case {case.id} ({case.input_file}): {exc.message}", fix=exc.fix) from None


def batch_entries(cases: list[Case]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """batch.yaml entries (every case's input, in case order) and case_order.yaml."""
    entries = [dict(case.input) for case in cases]
    order = [{"case_id": case.id, "entry_count": 1} for case in cases]
    return entries, order


def plan_invocations(config: EvalConfig, cases: list[Case], settings: RunSettings) -> list[Invocation]:
    if not config.is_batch:
        invocations = []
        for case in cases:
            rendered = render_for_case(settings.template, case)
            invocations.append(
                Invocation(id=case.id, cases=(case,), prompt=compose_prompt(config, rendered), arguments=rendered)
            )
        return invocations
    entries, order = batch_entries(cases)
    # In batch mode the template sees the first batch.yaml entry ({prompt} shortcut).
    first = entries[0] if entries else {}
    try:
        rendered = render_template(settings.template, first)
    except TemplateError as exc:
        first_case = f"case {cases[0].id} ({cases[0].input_file})" if cases else "no case"
        raise TemplateError(f"batch: the first entry of batch.yaml, {first_case}: {exc.message}",
                            fix=exc.fix) from None
    return [
        Invocation(
            id="batch",
            cases=tuple(cases),
            prompt=compose_prompt(config, rendered),
            arguments=rendered,
            batch_entries=tuple(entries),
            case_order=tuple(order),
        )
    ]
