"""Scripts for the scripted model server: what the "model" answers, step by step.

A script is a YAML list of steps, or a mapping `{steps: [...], advance: ...}`:

    - text: "I'll create the file."      # optional text before the tool calls
      tool: Bash
      input: {command: "echo hi > out.txt"}
    - tool_calls:                          # several tool calls in one turn
        - {tool: Read, input: {file_path: out.txt}}
        - {tool: Bash, input: {command: ls}}
    - text: "Done."                        # a final answer ends the turn
      usage: {input_tokens: 1200, output_tokens: 40}
    - error: {status: 529}                 # an API error (retry/failure tests)

Which step answers a request is decided here, purely: by default the number
of assistant messages in the request (stateless, so a retried request gets
the same answer), or the count of requests served so far
(`advance: per_request`, for callers that sample the same prompt N times).
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_eval_sandbox.config.yaml_reader import read_yaml_file
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.gateway.api_errors import STATUS_BY_TYPE, error_type_for
from agent_eval_sandbox.gateway.usage import Usage

_STRICT = ConfigDict(extra="forbid", frozen=True)


class Advance(enum.StrEnum):
    PER_TURN = "per_turn"
    PER_REQUEST = "per_request"


class ToolCall(BaseModel):
    model_config = _STRICT

    tool: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)


class ErrorSpec(BaseModel):
    """An API error; give the status, the Anthropic error type, or both."""

    model_config = _STRICT

    status: int | None = Field(default=None, ge=400, le=599)
    type: str | None = None
    message: str = "scripted error"

    @model_validator(mode="after")
    def _status_or_type(self) -> ErrorSpec:
        if self.status is None and self.type is None:
            raise ValueError("an error needs a `status` (e.g. 529) or a `type` (e.g. overloaded_error)")
        if self.status is None and self.type not in STATUS_BY_TYPE:
            raise ValueError(f"unknown error type {self.type!r} without a `status`; known: {', '.join(STATUS_BY_TYPE)}")
        return self

    @property
    def http_status(self) -> int:
        return self.status if self.status is not None else STATUS_BY_TYPE[self.type or ""]

    @property
    def error_type(self) -> str:
        return self.type or error_type_for(self.http_status)


class Step(BaseModel):
    model_config = _STRICT

    text: str | None = None
    tool: str | None = Field(default=None, min_length=1)
    input: dict[str, Any] | None = None
    tool_calls: list[ToolCall] | None = Field(default=None, min_length=1)
    error: ErrorSpec | None = None
    usage: Usage | None = None
    model: str | None = None
    delay_s: float = Field(default=0.0, ge=0.0, le=3600.0)

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        if self.tool is not None and self.tool_calls is not None:
            raise ValueError("give either `tool` (one call) or `tool_calls` (several), not both")
        if self.input is not None and self.tool is None:
            raise ValueError("`input` belongs to a `tool` call; add `tool: NAME`")
        if self.error is not None and (self.text is not None or self.calls):
            raise ValueError("an `error` step answers with the error only: remove `text`/`tool`/`tool_calls`")
        if self.error is None and self.text is None and not self.calls:
            raise ValueError("a step needs `text`, `tool`, `tool_calls` or `error`")
        return self

    @property
    def calls(self) -> list[ToolCall]:
        if self.tool is not None:
            return [ToolCall(tool=self.tool, input=self.input or {})]
        return list(self.tool_calls or [])


class Script(BaseModel):
    model_config = _STRICT

    steps: list[Step]
    advance: Advance = Advance.PER_TURN
    source: str = Field(default="<inline script>", exclude=True)

    def step_at(self, index: int) -> Step | None:
        """The step for `index`, or None once the script is exhausted."""
        return self.steps[index] if 0 <= index < len(self.steps) else None


def _where(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _keys_at(loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The keys allowed in the mapping at `loc` (the place of an unknown key)."""
    if not loc:
        return ("steps", "advance")
    if len(loc) >= 3 and loc[-2] == "tool_calls":
        return tuple(ToolCall.model_fields)
    models: dict[str, type[BaseModel]] = {"error": ErrorSpec, "usage": Usage}
    return tuple(models.get(str(loc[-1]), Step).model_fields)


def _field(loc: tuple[Any, ...]) -> str | None:
    """`steps[1].input (step 2)`: the index as the file has it, and the step as a person counts."""
    where = _where(loc)
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        return f"{where} (step {loc[1] + 1})"
    return where or None


_PHRASES = (("Value error, ", ""), ("Input should be ", "must be "), ("greater than or equal to", "at least"),
            ("less than or equal to", "at most"), ("a valid integer", "a whole number"), ("a valid number", "a number"),
            ("a valid ", "a "))


def _plain(message: str) -> str:
    """pydantic's wording, as a person would say it ("Input should be a valid string" -> "must be a string")."""
    for phrase, plain in _PHRASES:
        message = message.replace(phrase, plain)
    return message.split(", unable to parse")[0]  # the value is shown anyway


def _script_error(exc: ValidationError, source: Path | str) -> ConfigError:
    """The first problem as one line: the file, the step (index and number), the key, the fix."""
    errors = exc.errors(include_url=False)
    # A misspelt key also leaves its right spelling "missing": the typo is the cause to name.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(first["loc"])
    if first["type"] == "extra_forbidden":
        key, loc = str(loc[-1]), loc[:-1]
        allowed = _keys_at(loc)
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(f"unknown key {key!r}{hint}", file=source, field=_field(loc),
                           fix=f"the keys here are {', '.join(allowed)}")
    in_step = len(loc) >= 2 and loc[0] == "steps"
    fix = "fix that step of the script" if in_step else "fix the script"
    if first["type"] == "missing":
        return ConfigError(f"{loc[-1]!r} is required", file=source, field=_field(loc[:-1]), fix=fix)
    if first["type"] in ("dict_type", "model_type"):
        message = "must be a mapping of keys to values"
        if in_step and len(loc) == 2:
            fix = "write a step as `- text: ...`, `- tool: NAME` (with `input:`), `- tool_calls: [...]` or `- error:`"
    else:
        message = _plain(first["msg"])
    if first["type"] != "value_error":  # our own checks' messages say what is wrong already
        got = first.get("input")
        shown = "a mapping" if isinstance(got, dict) else "a list" if isinstance(got, list) else repr(got)
        message += f" (got {shown})"
    return ConfigError(message, file=source, field=_field(loc), fix=fix)


def parse_script(data: Any, source: Path | str = "<inline script>") -> Script:
    """Validate script data (a list of steps or a mapping); errors name source and step."""
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"a script must be a list of steps or a mapping with `steps`, not {type(data).__name__}",
            file=source,
            fix="write `- text: ...` / `- tool: Bash` items",
        )
    try:
        return Script.model_validate({**data, "source": str(source)})
    except ValidationError as exc:
        raise _script_error(exc, source) from exc


def load_script(path: Path | str) -> Script:
    return parse_script(read_yaml_file(Path(path)), source=path)


def count_assistant_messages(request: Mapping[str, Any]) -> int:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")


def select_step_index(advance: Advance, request: Mapping[str, Any], served_before: int) -> int:
    """Which step answers `request`; `served_before` counts earlier requests."""
    if advance is Advance.PER_REQUEST:
        return served_before
    return count_assistant_messages(request)


def tool_choice_conflict(step: Step, tool_choice: Any) -> str | None:
    """Why `step` cannot honour the request's `tool_choice`, or None if it can.

    An LLM judge forces its verdict tool; a script that answers with another
    tool or with text would make the judge fail far from the cause, so the
    server says exactly what is wrong instead.
    """
    if not isinstance(tool_choice, Mapping) or step.error is not None:
        return None
    names = [call.tool for call in step.calls]
    does = f"calls {', '.join(names)}" if names else "answers with text"
    kind = tool_choice.get("type")
    if kind == "tool":
        forced = tool_choice.get("name")
        if not names or any(name != forced for name in names):
            return (
                f"the request forces tool_choice {{type: tool, name: {forced}}} but the step {does}; "
                f"script it as `tool: {forced}`"
            )
    elif kind == "any" and not names:
        return f"the request forces a tool call (tool_choice any) but the step {does}"
    elif kind == "none" and names:
        return f"the request forbids tool calls (tool_choice none) but the step {does}"
    return None
