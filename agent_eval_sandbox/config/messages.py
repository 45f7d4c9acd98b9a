"""Validation errors of eval.yaml as one line a user can act on.

pydantic reports a location tuple and a message written for programmers
("Input should be a valid dictionary or instance of ThresholdConfig"). Here
that becomes: the file, the field with its index, the judge, hook, step or
seed it belongs to by name, and what the value must be — never a class name
or library phrasing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agent_eval_sandbox.config.models import RuleError
from agent_eval_sandbox.errors import ConfigError

_TYPE_NAMES = {"str", "int", "float", "bool", "none", "list", "dict", "tuple"}

# What a value must be, by pydantic error type.
_PREDICATES = {
    "string_type": "must be a string",
    "string_sub_type": "must be a string",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping (key: value lines)",
    "model_type": "must be a mapping (key: value lines)",
    "model_attributes_type": "must be a mapping (key: value lines)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "extra_forbidden": "is not a known key",
    "none_required": "must be empty",
}


def _is_union_tag(part: Any) -> bool:
    # pydantic puts union members and validator names into `loc`
    # (e.g. ('permissions', 'deny', 0, 'PathRule', 'path')): they are not fields.
    return isinstance(part, str) and (
        part[:1].isupper() or "[" in part or "-" in part or part in _TYPE_NAMES or part.startswith("function-")
    )


def dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif str(part).startswith("["):
            text += str(part)
        else:
            text += f".{part}" if text else str(part)
    return text


def _predicate(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _PREDICATES:
        return _PREDICATES[kind]
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', 'the listed values')}"
    bounds = {"greater_than": "greater than", "greater_than_equal": "at least", "less_than": "less than",
              "less_than_equal": "at most"}
    if kind in bounds:
        key = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}[kind]
        return f"must be {bounds[kind]} {ctx.get(key)}"
    if kind in ("too_short", "too_long"):
        return "has the wrong number of entries"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", error["msg"])).removeprefix("Value error, ")
    return "has a value of the wrong kind"


def _got(value: Any) -> str:
    if isinstance(value, (dict, list, tuple)) or value is None:
        return ""
    text = repr(value)
    return f" (got {text[:77] + '...' if len(text) > 80 else text})"


def _label(raw: Any, loc: tuple[Any, ...]) -> str:
    """The owner of a location inside a judge, hook, step or seed: ` (judge 'quality')`, or ""."""
    def entry(*keys: Any) -> Any:
        node = raw
        for key in keys:
            in_list = isinstance(key, int) and isinstance(node, list) and key < len(node)
            if not in_list and not (isinstance(node, dict) and key in node):
                return None
            node = node[key]
        return node if isinstance(node, dict) else None

    found: tuple[str, Any] | None = None
    if len(loc) >= 2 and loc[0] == "judges" and isinstance(loc[1], int):
        judge = entry("judges", loc[1])
        found = ("judge", judge.get("name") if judge else None)
    elif len(loc) >= 3 and loc[0] == "hooks" and isinstance(loc[2], int):
        hook = entry("hooks", loc[1], loc[2])
        if hook:
            command = hook.get("command")
            first = command.strip().splitlines()[0][:60] if isinstance(command, str) and command.strip() else None
            found = ("hook", hook.get("description") or first)
    elif len(loc) >= 3 and loc[:2] == ("execution", "steps") and isinstance(loc[2], int):
        step = entry("execution", "steps", loc[2])
        found = ("step", step.get("id") if step else None)
    elif len(loc) >= 3 and loc[:2] == ("generation", "seeds") and isinstance(loc[2], int):
        seed = entry("generation", "seeds", loc[2])
        found = ("seed", seed.get("category") if seed else None)
    if found is None or not isinstance(found[1], str) or not found[1].strip():
        return ""
    return f" ({found[0]} {found[1].strip()!r})"


def _first_relevant(exc: ValidationError) -> ErrorDetails:
    """The error to show: our own rules' first, since a union reports every member's complaint."""
    errors = exc.errors(include_url=False)
    ours = [e for e in errors if isinstance((e.get("ctx") or {}).get("error"), RuleError)]
    if ours:
        return ours[0]
    # Of a union's complaints, the one that went deepest is about the form the user meant
    # (a {path, tools} rule missing its path, rather than "not a string").
    first_loc = errors[0]["loc"][:-1]
    siblings = [e for e in errors if e["loc"][: len(first_loc)] == first_loc]
    return max(siblings, key=lambda e: len(e["loc"]))


def validation_error(path: Path, exc: ValidationError, raw: Any) -> ConfigError:
    """The first validation error as one line naming the file, the field and its owner."""
    error = _first_relevant(exc)
    loc = tuple(p for p in error["loc"] if not _is_union_tag(p))
    rule = (error.get("ctx") or {}).get("error")
    fix = None
    if isinstance(rule, RuleError):
        if rule.field:
            loc = (*loc, *_split(rule.field))
        fix = rule.fix
    if error["type"] == "missing":
        message = "is required"
        fix = fix or f"add {loc[-1]}"
    else:
        predicate = _predicate(error)
        got = _got(error.get("input"))
        shown = "(got " in predicate or (bool(got) and got[len(" (got "):-1] in predicate)
        message = predicate if shown else predicate + got
    where = dotted(loc)
    if where and message.startswith(where):
        text = message  # a rule that already names its field, e.g. a nested block's own message
    else:
        text = f"{where}{_label(raw, loc)} {message}" if where else message
    config_error = ConfigError(text, file=path, fix=fix)
    config_error.field = where or None
    return config_error


def _split(field: str) -> tuple[Any, ...]:
    """'steps[1].id' → ('steps', 1, 'id')."""
    parts: list[Any] = []
    for piece in field.replace("]", "").split("."):
        name, *indexes = piece.split("[")
        if name:
            parts.append(name)
        parts += [int(i) if i.isdigit() else i for i in indexes]
    return tuple(parts)
