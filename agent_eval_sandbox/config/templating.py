"""Argument and prompt templates: Jinja2 or `{field}` braces, never both.

A template containing `{{` or `{%` is Jinja2 in full, rendered with `input`
bound to the case's input.yaml and StrictUndefined. Otherwise `{field}` is a
required substitution (missing or empty is an error) and `{field?}` an
optional one (omitted when missing or empty).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from agent_eval_sandbox.errors import TemplateError

BRACE_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.\-]*)(\?)?\}")
_UNDEFINED_NAME = re.compile(r"has no attribute '([^']+)'|'([^']+)' is undefined|no item named '([^']+)'")

# Autoescape off: the output is a command line / prompt, not HTML.
_JINJA = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


def is_jinja(template: str) -> bool:
    return "{{" in template or "{%" in template


def check_syntax(template: str) -> str | None:
    """Return a Jinja2 syntax problem (for load-time validation), or None."""
    if not is_jinja(template):
        return None
    try:
        _JINJA.parse(template)
    except TemplateSyntaxError as exc:
        return f"invalid Jinja2 template at line {exc.lineno}: {exc.message}"
    return None


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict, tuple)) and len(value) == 0)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def missing_field_error(field: str) -> TemplateError:
    return TemplateError(
        f"Missing required field in template: {field}",
        fix=f"add '{field}' to the case's input.yaml, or make it optional ({{{field}?}} or "
        f"{{{{ input.get('{field}', '') }}}})",
    )


def _render_jinja(template: str, data: Mapping[str, Any], steps: Mapping[str, Any] | None = None) -> str:
    names: dict[str, Any] = {"input": dict(data)}
    if steps is not None:
        names["steps"] = dict(steps)
    try:
        return _JINJA.from_string(template).render(**names)
    except UndefinedError as exc:
        match = _UNDEFINED_NAME.search(str(exc))
        field = next((g for g in match.groups() if g), str(exc)) if match else str(exc)
        raise missing_field_error(field) from None
    except TemplateSyntaxError as exc:
        raise TemplateError(f"invalid Jinja2 template at line {exc.lineno}: {exc.message}") from None
    except Exception as exc:  # a template error of any other kind is still the user's template
        raise TemplateError(f"template failed to render: {type(exc).__name__}: {exc}") from None


def _dotted(steps: Mapping[str, Any], field: str) -> Any:
    """`steps.<id>.<key>` in a brace template."""
    value: Any = steps
    for part in field.split(".")[1:]:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _render_braces(template: str, data: Mapping[str, Any], steps: Mapping[str, Any] | None = None) -> str:
    def substitute(match: re.Match[str]) -> str:
        field, optional = match.group(1), match.group(2) == "?"
        value = _dotted(steps, field) if steps is not None and field.startswith("steps.") else data.get(field)
        if _is_empty(value):
            if optional:
                return ""
            raise missing_field_error(field)
        return _as_text(value)

    return BRACE_FIELD.sub(substitute, template).strip()


def render_template(template: str, data: Mapping[str, Any], steps: Mapping[str, Any] | None = None) -> str:
    """Render an arguments/prompt template for one case's input (and, in a pipeline's step, `steps`:
    the earlier steps' `{output, exit_code, files}` by step id)."""
    if is_jinja(template):
        return _render_jinja(template, data, steps)
    return _render_braces(template, data, steps)
