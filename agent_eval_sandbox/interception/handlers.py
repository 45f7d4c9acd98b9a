"""`tool_handlers.yaml`: the compiled tool-interception handlers (reference fields).

    handlers:
      - match: "Any Jira interaction via MCP tools or scripts."
        patterns: ["Bash", "mcp__atlassian__*"]
        input_filters: ["jira", "JIRA_SERVER"]          # regexes, case-insensitive
        env_checks: {JIRA_SERVER: {must_contain: ["localhost", "test"]}}
        prompt: "Only allow if JIRA_SERVER points to a test instance."
    hook_model: claude-haiku-4-5-20251001
    case_overrides: {"What priority should this have?": "Normal"}

The file lives on the host only: the broker reads it, the container never sees
it. Every regex is compiled at load so a typo is a load error, not a broker
surprise in the middle of a run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent_eval_sandbox.config.paths import tool_prompt_file
from agent_eval_sandbox.config.yaml_reader import read_yaml_mapping
from agent_eval_sandbox.errors import ConfigError

HANDLERS_FILE_NAME = "tool_handlers.yaml"
ASK_USER_QUESTION = "AskUserQuestion"
# Keys reference tools write that this project does not act on (calibration
# shadows of the answerer): accepted so a reference-resolved file loads as is.
IGNORED_REFERENCE_KEYS = ("calibration", "hook_shadow_models")

_STRICT = ConfigDict(extra="forbid", frozen=True)


class HandlersError(ConfigError):
    """tool_handlers.yaml (or the handlers compiled from eval.yaml) is invalid."""


def _none_is_empty_list(value: Any) -> Any:
    # `input_filters:` with nothing after it parses as None.
    return [] if value is None else value


class EnvCheck(BaseModel):
    model_config = _STRICT

    must_contain: list[str] = Field(default_factory=list)

    @field_validator("must_contain", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return _none_is_empty_list(value)


class Handler(BaseModel):
    model_config = _STRICT

    match: str = ""
    patterns: list[str] = Field(default_factory=list)
    input_filters: list[str] = Field(default_factory=list)
    env_checks: dict[str, EnvCheck] = Field(default_factory=dict)
    prompt: str = ""
    prompt_file: str = ""

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored_and_nulls(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if k not in IGNORED_REFERENCE_KEYS}
        for key in ("patterns", "input_filters"):
            if key in data:
                data[key] = _none_is_empty_list(data[key])
        if data.get("env_checks") is None and "env_checks" in data:
            data["env_checks"] = {}
        return data

    @field_validator("input_filters")
    @classmethod
    def _regexes_compile(cls, filters: list[str]) -> list[str]:
        for index, pattern in enumerate(filters):
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"input_filters[{index}] {pattern!r} is not a valid regex: {exc}") from None
        return filters

    @property
    def label(self) -> str:
        text = " ".join(self.match.split())
        return text if len(text) <= 60 else text[:57] + "..."

    def matches_ask_user_question(self) -> bool:
        """Whether a call of AskUserQuestion would reach this handler (exact or prefix glob)."""
        return any(pattern_matches(p, ASK_USER_QUESTION) for p in self.patterns)


class OverrideEntry(BaseModel):
    """A case override with its provenance: `{answer: "Normal", source: human}`."""

    model_config = _STRICT

    answer: str | None = None
    source: str | None = None

    @field_validator("answer", mode="before")
    @classmethod
    def _scalar(cls, value: Any) -> Any:
        return override_text(value)


def override_text(value: Any) -> Any:
    """YAML scalars as answer text: `yes` parses as True but means "yes"."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    return value


class ToolHandlers(BaseModel):
    model_config = _STRICT

    handlers: list[Handler] = Field(default_factory=list)
    hook_model: str | None = None
    case_overrides: dict[str, str | OverrideEntry] = Field(default_factory=dict)
    case_overrides_source: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {k: v for k, v in data.items() if k not in IGNORED_REFERENCE_KEYS}
        if "handlers" in data:
            data["handlers"] = _none_is_empty_list(data["handlers"])
        overrides = data.get("case_overrides")
        if overrides is None and "case_overrides" in data:
            data["case_overrides"] = {}
        elif isinstance(overrides, dict):
            data["case_overrides"] = {
                str(question): (answer if isinstance(answer, dict) else override_text(answer))
                for question, answer in overrides.items()
                if answer is not None
            }
        return data

    def asks_user(self) -> bool:
        """Whether some handler answers AskUserQuestion (the CLI then needs the tool enabled)."""
        return any(h.matches_ask_user_question() for h in self.handlers)

    def with_hook_model(self, default: str) -> ToolHandlers:
        return self if self.hook_model else self.model_copy(update={"hook_model": default})

    def resolve_prompt_files(self, base_dir: Path, source: Path | str) -> ToolHandlers:
        """Fill each empty `prompt` from its `prompt_file` (relative to `base_dir`)."""
        resolved: list[Handler] = []
        for index, handler in enumerate(self.handlers):
            if handler.prompt or not handler.prompt_file:
                resolved.append(handler)
                continue
            path = tool_prompt_file(base_dir, handler.prompt_file)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = getattr(exc, "strerror", None) or exc
                raise HandlersError(
                    f"prompt_file {handler.prompt_file!r} cannot be read ({path}: {reason})",
                    file=source,
                    field=f"handlers[{index}]",
                    fix="create the file or correct the path (relative to the eval.yaml directory)",
                ) from exc
            resolved.append(handler.model_copy(update={"prompt": text}))
        return self.model_copy(update={"handlers": resolved})

    def to_yaml(self) -> str:
        """The file as the reference writes it: only the fields that carry something."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def pattern_matches(pattern: str, tool_name: str) -> bool:
    """A handler pattern: the exact tool name, or a trailing-`*` prefix glob (`mcp__jira__*`, `*`)."""
    if pattern == tool_name:
        return True
    return pattern.endswith("*") and tool_name.startswith(pattern[:-1])


def _location(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def parse_handlers(data: Any, source: Path | str) -> ToolHandlers:
    """Validate handler data; one error line naming the file, the handler and the problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise HandlersError(
            f"must be a mapping with `handlers:`, not a {type(data).__name__}",
            file=source,
            fix="write `handlers: [...]` at the top level",
        )
    try:
        return ToolHandlers.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        # pydantic puts the members of case_overrides' union into loc: they are not fields.
        loc = tuple(p for p in first["loc"] if p not in ("str", "OverrideEntry"))
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}"
            loc = loc[:-1]
        where = _location(loc)
        handler = _handler_label(data, loc)
        raise HandlersError(
            f"{handler}{message}",
            file=source,
            field=where or None,
            fix="fix that entry of the handlers file",
        ) from None


def _handler_label(data: dict[str, Any], loc: tuple[Any, ...]) -> str:
    if len(loc) >= 2 and loc[0] == "handlers" and isinstance(loc[1], int):
        handlers = data.get("handlers")
        if isinstance(handlers, list) and loc[1] < len(handlers) and isinstance(handlers[loc[1]], dict):
            match = handlers[loc[1]].get("match")
            if isinstance(match, str) and match.strip():
                return f"(handler {Handler(match=match).label!r}) "
    return ""


def load_handlers_file(path: Path) -> ToolHandlers:
    """Read and validate a tool_handlers.yaml; prompt files resolve beside it."""
    handlers = parse_handlers(read_yaml_mapping(path, what=HANDLERS_FILE_NAME), source=path)
    return handlers.resolve_prompt_files(path.parent, source=path)
