"""A judge's `if:` expression, evaluated with `annotations` and `outputs` and no builtins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ConditionError(Exception):
    """The expression raised: the judge errors on that case (it is not skipped)."""


def condition_syntax_error(expression: str) -> str | None:
    """Why `expression` does not compile, or None (for load-time validation)."""
    try:
        compile(expression, "<if>", "eval")
    except SyntaxError as exc:
        return f"invalid Python expression: {exc.msg}"
    return None


def evaluate_condition(expression: str, outputs: Mapping[str, Any]) -> bool:
    """Whether the judge applies to this case; raises ConditionError if the expression does."""
    try:
        code = compile(expression, "<if>", "eval")
        names = {"annotations": outputs.get("annotations", {}), "outputs": outputs}
        return bool(eval(code, {"__builtins__": {}}, names))
    except Exception as exc:  # any failure of the user's expression is that case's error
        raise ConditionError(f"condition {expression!r} raised {type(exc).__name__}: {exc}") from None
