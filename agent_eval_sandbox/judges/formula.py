"""Evaluating a `reward.formula` expression over judge values, without `eval` (pure).

The formula was checked at load (config/reward_formula.py: the allowed
syntax, calls, constants and size); here its syntax tree is walked by a small
interpreter that knows only those nodes. Every value is a float, or a list of
floats (a list or tuple literal, for `mean`, `sum`, `len`, `min`, `max`):
arithmetic on anything else is refused, so no formula can build a huge list or
integer. What goes wrong while computing — a judge name with no value, a
division by zero, a result that is not a finite number — is a `FormulaError`,
which the reward turns into 0.0 with the reason, as the reference does.
"""

from __future__ import annotations

import ast
import math
import operator
import statistics
from collections.abc import Callable, Mapping, Sequence

from agent_eval_sandbox.config.reward_formula import formula_problem

Item = float | list[float]


class FormulaError(Exception):
    """The formula could not be computed for this case."""


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}


def _number(value: Item, what: str) -> float:
    if isinstance(value, list):
        raise FormulaError(f"{what} needs a number, not a list")
    return value


def _numbers(args: Sequence[Item], name: str) -> list[float]:
    """A call's arguments as numbers: one list argument, or the arguments themselves."""
    if len(args) == 1 and isinstance(args[0], list):
        return args[0]
    return [_number(a, f"{name}()") for a in args]


def _mean(values: list[float]) -> float:
    if not values:
        raise FormulaError("mean() of nothing")
    return statistics.fmean(values)


def _round(args: Sequence[Item]) -> float:
    if not 1 <= len(args) <= 2:
        raise FormulaError("round() takes a number and optionally the digits")
    digits = int(_number(args[1], "round()")) if len(args) == 2 else 0
    return float(round(_number(args[0], "round()"), max(-20, min(20, digits))))


def _call(name: str, args: Sequence[Item]) -> float:
    if name == "round":
        return _round(args)
    if name == "abs":
        if len(args) != 1:
            raise FormulaError("abs() takes one number")
        return abs(_number(args[0], "abs()"))
    values = _numbers(args, name)
    if name == "len":
        if len(args) != 1 or not isinstance(args[0], list):
            raise FormulaError("len() takes one list")
        return float(len(values))
    if name == "sum":
        return math.fsum(values)
    if name == "mean":
        return _mean(values)
    if not values:
        raise FormulaError(f"{name}() of nothing")
    return min(values) if name == "min" else max(values)


class _Interpreter:
    def __init__(self, names: Mapping[str, float]) -> None:
        self.names: dict[str, float] = dict(names)
        self.assigned: dict[str, Item] = {}

    def value(self, node: ast.expr) -> Item:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return float(node.value)
            raise FormulaError("only numbers are allowed")
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [_number(self.value(e), "a list item") for e in node.elts]
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand)
            if isinstance(node.op, ast.Not):
                return float(not self._truth(operand))
            number = _number(operand, "a sign")
            return -number if isinstance(node.op, ast.USub) else number
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.BoolOp):
            return self._boolean(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.IfExp):
            return self.value(node.body) if self._truth(self.value(node.test)) else self.value(node.orelse)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            return _call(node.func.id, [self.value(a) for a in node.args])
        raise FormulaError(f"'{type(node).__name__}' is not allowed in a reward formula")

    def _name(self, name: str) -> Item:
        if name in self.assigned:
            return self.assigned[name]
        if name in self.names:
            return self.names[name]
        raise FormulaError(f"'{name}' has no value for this case (the judge was skipped, errored or did not run)")

    @staticmethod
    def _truth(value: Item) -> bool:
        return bool(value)

    def _binary(self, node: ast.BinOp) -> float:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise FormulaError(f"'{type(node.op).__name__}' is not allowed in a reward formula")
        left = _number(self.value(node.left), "arithmetic")
        right = _number(self.value(node.right), "arithmetic")
        try:
            return op(left, right)
        except ZeroDivisionError:
            raise FormulaError("division by zero") from None
        except OverflowError:
            raise FormulaError("a number too large") from None

    def _boolean(self, node: ast.BoolOp) -> Item:
        # Python's semantics: the first operand that decides, not a bool.
        result = self.value(node.values[0])
        for operand in node.values[1:]:
            decided = not self._truth(result) if isinstance(node.op, ast.And) else self._truth(result)
            if decided:
                return result
            result = self.value(operand)
        return result

    def _compare(self, node: ast.Compare) -> float:
        left = _number(self.value(node.left), "a comparison")
        for op_node, right_node in zip(node.ops, node.comparators, strict=True):
            right = _number(self.value(right_node), "a comparison")
            op = _COMPARE.get(type(op_node))
            if op is None:
                raise FormulaError(f"'{type(op_node).__name__}' is not allowed in a reward formula")
            if not op(left, right):
                return 0.0
            left = right
        return 1.0

    def run(self, tree: ast.Module) -> float:
        *assignments, last = tree.body
        for statement in assignments:
            if not isinstance(statement, ast.Assign) or not isinstance(statement.targets[0], ast.Name):
                raise FormulaError("only `name = expression` lines may come before the result")
            self.assigned[statement.targets[0].id] = self.value(statement.value)
        if not isinstance(last, ast.Expr):
            raise FormulaError("the last line must be an expression")
        result = _number(self.value(last.value), "the result")
        if not math.isfinite(result):
            raise FormulaError(f"the result is {result}, not a finite number")
        return result


def parse_formula(formula: str) -> ast.Module:
    """The formula's syntax tree, after the load-time check (raises FormulaError if it fails it)."""
    problem = formula_problem(formula)
    if problem:
        raise FormulaError(f"the formula {problem}")
    return ast.parse(formula.strip(), mode="exec")


def evaluate_formula(formula: str | ast.Module, names: Mapping[str, float]) -> float:
    """The formula's value with each judge name bound to its value (in [0, 1]); raises FormulaError."""
    tree = parse_formula(formula) if isinstance(formula, str) else formula
    try:
        return _Interpreter(names).run(tree)
    except RecursionError:
        raise FormulaError("the formula is nested too deeply") from None
