"""Planning: what each invocation will run, before anything is started (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.dataset import Case
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.config.templating import render_template
from agent_eval_sandbox.errors import TemplateError
from agent_eval_sandbox.runner.steps import check_step_templates


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


def _template_origin(settings: RunSettings, eval_file: Path | None) -> str:
    """Where the template that failed is written: `--skill-args`, or eval.yaml's field."""
    if settings.template_source.startswith("--") or eval_file is None:
        return settings.template_source
    return f"{eval_file}: {settings.template_source}"


def render_for_case(template: str, case: Case, *, origin: str = "") -> str:
    """The template rendered for one case; an error names the case's input file and the template's origin."""
    try:
        return render_template(template, case.input)
    except TemplateError as exc:
        where = f" (template: {origin})" if origin else ""
        raise TemplateError(f"{case.input_file}: case {case.id}: {exc.message}{where}", fix=exc.fix) from None


def batch_entries(cases: list[Case]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """batch.yaml entries (every case's input, in case order) and case_order.yaml."""
    entries = [dict(case.input) for case in cases]
    order = [{"case_id": case.id, "entry_count": 1} for case in cases]
    return entries, order


def plan_invocations(
    config: EvalConfig, cases: list[Case], settings: RunSettings, *, eval_file: Path | None = None
) -> list[Invocation]:
    """What each invocation runs; `eval_file` (eval.yaml) is named in template errors."""
    origin = _template_origin(settings, eval_file)
    if not config.is_batch:
        invocations = []
        for case in cases:
            if config.execution.steps:
                # A pipeline's prompt here is its first step's (each step renders its own when it starts).
                opening = check_step_templates(config, case, eval_file)
                invocations.append(Invocation(id=case.id, cases=(case,), prompt=opening, arguments=opening))
                continue
            rendered = render_for_case(settings.template, case, origin=origin)
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
        where = f"{cases[0].input_file}: " if cases else ""
        raise TemplateError(f"{where}batch (first entry of batch.yaml): {exc.message} (template: {origin})",
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
