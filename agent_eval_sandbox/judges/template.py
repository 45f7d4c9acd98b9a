"""Rendering LLM judge prompts with the reference's template variables.

`{{ outputs }}` renders the case's files as markdown and still allows
`{{ outputs.files }}`; `{{ annotations }}` renders as a bullet list and still
allows `{{ annotations.get('tier') }}`; `conversation`, `reasoning`,
`tool_trace`, `inputs`, `evidence` and `arguments` are precomputed. An
unknown variable renders empty, as in the reference. The template is the
user's; the values are untrusted case data and are only ever substituted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml
from jinja2 import TemplateError as JinjaTemplateError
from jinja2.sandbox import SandboxedEnvironment

from agent_eval_sandbox.judges.events import (
    conversation_text,
    evidence_text,
    tool_trace,
)

_ENV = SandboxedEnvironment(autoescape=False, keep_trailing_newline=True)
_ENV.filters["tojson"] = lambda value, indent=2: json.dumps(value, indent=indent, ensure_ascii=False, default=str)


class PromptRenderError(Exception):
    """A judge prompt failed to render for a case."""


def render_files(files: Mapping[str, Any]) -> str:
    """Every file as a `### path` section; binary files as a marker."""
    parts = []
    for path, content in sorted(files.items()):
        if isinstance(content, Mapping) and content.get("_binary"):
            parts.append(f"\n### {path}\n\n<binary: {content.get('name', path)}>\n")
        else:
            parts.append(f"\n### {path}\n\n{content}\n")
    return "".join(parts)


def render_inputs(inputs: Any) -> str:
    """input.yaml as `**key**: value` paragraphs (nested values as YAML)."""
    if not isinstance(inputs, Mapping):
        return "" if inputs is None else str(inputs)
    parts = []
    for key, value in inputs.items():
        if isinstance(value, (dict, list)):
            value = yaml.safe_dump(value, default_flow_style=False, allow_unicode=True, sort_keys=False).rstrip()
        parts.append(f"**{key}**: {value}")
    return "\n\n".join(parts)


def render_annotations(annotations: Mapping[str, Any]) -> str:
    return "".join(f"- **{key}**: {value}\n" for key, value in sorted(annotations.items(), key=lambda kv: str(kv[0])))


class _Rendered(dict[str, Any]):
    """A mapping that prints as prepared text but keeps item and attribute access."""

    def __init__(self, data: Mapping[str, Any], text: str) -> None:
        super().__init__(data)
        self._text = text

    def __str__(self) -> str:
        return self._text


def template_variables(record: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    events = record.get("events") or []
    raw_annotations = record.get("annotations")
    annotations: Mapping[str, Any] = raw_annotations if isinstance(raw_annotations, Mapping) else {}
    conversation = record.get("conversation") or (conversation_text(events) if events else "")
    return {
        "outputs": _Rendered(record, render_files(record.get("files") or {})),
        "conversation": conversation,
        "reasoning": conversation_text(events, include_thinking=True) if events else conversation,
        "tool_trace": tool_trace(events),
        "inputs": render_inputs(record.get("inputs")),
        "evidence": evidence_text(events),
        "annotations": _Rendered(annotations, render_annotations(annotations)),
        "arguments": dict(arguments),
    }


def template_syntax_error(template: str) -> str | None:
    try:
        _ENV.parse(template)
    except JinjaTemplateError as exc:
        line = getattr(exc, "lineno", None)
        return f"invalid Jinja2 template{f' at line {line}' if line else ''}: {exc.message or exc}"
    return None


def render_prompt(template: str, record: Mapping[str, Any], arguments: Mapping[str, Any],
                  extra: Mapping[str, Any] | None = None) -> str:
    """The template over the record's variables, and `extra` ones (the pairwise judge's two outputs)."""
    try:
        return _ENV.from_string(template).render(**template_variables(record, arguments), **(extra or {}))
    except Exception as exc:  # any failure of the user's template is that case's error
        raise PromptRenderError(f"the judge prompt failed to render: {type(exc).__name__}: {exc}") from None
