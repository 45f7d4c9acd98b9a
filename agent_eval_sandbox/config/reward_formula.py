"""The load-time check of a `reward.formula` expression (pure).

A formula is restricted Python over judge names, checked on its syntax tree
before anything could run it, as the reference does: arithmetic
(`+ - * / // %`), comparisons, `and`/`or`/`not`, `x if c else y`, list and
tuple literals, calls of `min max abs round sum len mean` only; no `**`, no
strings, no attribute access or subscripts, no name starting with `_`,
constants of magnitude at most 1e6, at most 200 nodes. Earlier lines may
assign names; the last line is an expression, the reward. Computing the reward
is not this module's business.
"""

from __future__ import annotations

import ast

ALLOWED_CALLS = frozenset({"min", "max", "abs", "round", "sum", "len", "mean"})
MAX_NODES = 200
MAX_CONSTANT = 1e6

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.Expr, ast.Assign, ast.Name, ast.Load, ast.Store, ast.Constant, ast.Call,
    ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
    ast.UnaryOp, ast.USub, ast.UAdd, ast.Not,
    ast.BoolOp, ast.And, ast.Or,
    ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
    ast.IfExp, ast.List, ast.Tuple,
)


def _parse(formula: str) -> ast.Module | str:
    try:
        return ast.parse(formula.strip(), mode="exec")
    except SyntaxError as exc:
        return f"is not a valid expression (line {exc.lineno}: {exc.msg})"
    except (ValueError, RecursionError, MemoryError):
        return "is not a valid expression"


def _node_problem(node: ast.AST) -> str | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return "uses '**', which is not allowed (use multiplication)"
    if not isinstance(node, _ALLOWED_NODES):
        return f"uses {_describe(node)}, which a reward formula may not"
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None:
            return None if isinstance(value, bool) else "uses None; only numbers are allowed"
        if not isinstance(value, (int, float)):
            return "uses a string or bytes constant; only numbers are allowed"
        if abs(value) > MAX_CONSTANT:
            return f"uses the constant {value!r}, larger in magnitude than {MAX_CONSTANT:g}"
    if isinstance(node, ast.Name) and node.id.startswith("_"):
        return f"uses the name {node.id!r}; names starting with '_' are not allowed"
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in ALLOWED_CALLS:
            return f"calls something other than {', '.join(sorted(ALLOWED_CALLS))}"
        if node.keywords:
            return "passes keyword arguments; call the allowed functions with positional ones"
    if isinstance(node, ast.Assign) and (len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name)):
        return "assigns to something other than one plain name"
    return None


def _describe(node: ast.AST) -> str:
    names = {
        ast.Attribute: "attribute access", ast.Subscript: "a subscript", ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension", ast.GeneratorExp: "a comprehension", ast.DictComp: "a comprehension",
        ast.SetComp: "a comprehension", ast.JoinedStr: "an f-string", ast.Import: "an import",
        ast.ImportFrom: "an import", ast.NamedExpr: "':='", ast.Dict: "a dict", ast.Set: "a set",
    }
    for kind, text in names.items():
        if isinstance(node, kind):
            return text
    return f"'{type(node).__name__}'"


def formula_problem(formula: str) -> str | None:
    """Why `formula` is not an acceptable reward expression, or None."""
    tree = _parse(formula)
    if isinstance(tree, str):
        return tree
    if not tree.body:
        return "is empty"
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        return f"has {len(nodes)} syntax nodes; at most {MAX_NODES} are allowed"
    for node in nodes:
        problem = _node_problem(node)
        if problem:
            return problem
    *assignments, last = tree.body
    if not isinstance(last, ast.Expr):
        return "must end with an expression (the reward), not an assignment"
    if any(not isinstance(statement, ast.Assign) for statement in assignments):
        return "may only assign names before its last line"
    return None


def formula_names(formula: str) -> list[str]:
    """The judge names an acceptable formula reads: its free names, less the allowed calls
    and the names it assigns before using them, in order of first use."""
    tree = _parse(formula)
    if isinstance(tree, str):
        return []
    assigned: set[str] = set()
    found: list[str] = []
    for statement in tree.body:
        value = statement.value if isinstance(statement, (ast.Assign, ast.Expr)) else statement
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                name = node.id
                if name not in assigned and name not in ALLOWED_CALLS and name not in found:
                    found.append(name)
        if isinstance(statement, ast.Assign):
            assigned |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
    return found
