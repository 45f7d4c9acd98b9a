"""`execution.env` / `runner.env`: `$VAR` references resolved from the caller."""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


def resolve_env(declared: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`$VAR`/`${VAR}` take the caller's value; an unset one is silently dropped.

    Anything else (including text that merely contains a `$`) is a literal.
    """
    resolved: dict[str, str] = {}
    for key, value in declared.items():
        match = _REFERENCE.match(value)
        if match is None:
            resolved[key] = value
            continue
        name = match.group(1) or match.group(2)
        if name in environ:
            resolved[key] = environ[name]
    return resolved
