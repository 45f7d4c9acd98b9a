"""Builtin judges: files under `judges/builtins/<category>/`, found by scanning.

A `.py` file is a python judge defining `judge(outputs, **kwargs) -> (value,
rationale)`; a `.md` file is a Jinja2 prompt scored pass/fail by the judge
model. Discovery only reads and parses files, never runs them: judge code
runs in the judge worker, and the `judge` function is checked on the syntax
tree. Names starting with `_` or `.` are ignored.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

BUILTINS_DIR = Path(__file__).with_name("builtins")

BuiltinKind = Literal["python", "llm"]
_KINDS: dict[str, BuiltinKind] = {".py": "python", ".md": "llm"}


class BuiltinRegistryError(Exception):
    """The shipped builtin catalog itself is broken (a packaging bug, not user input)."""


@dataclass(frozen=True)
class BuiltinJudge:
    name: str  # the file stem, unique across categories
    category: str
    kind: BuiltinKind
    path: Path

    @property
    def qualified_name(self) -> str:
        return f"{self.category}/{self.name}"


def _defines_judge(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(isinstance(node, ast.FunctionDef) and node.name == "judge" for node in tree.body)


def scan_builtins(directory: Path) -> tuple[BuiltinJudge, ...]:
    """The judges under `directory`, sorted by qualified name; raises on a broken catalog."""
    found: dict[str, BuiltinJudge] = {}
    for category_dir in sorted(directory.iterdir()):
        if not category_dir.is_dir() or category_dir.name.startswith(("_", ".")):
            continue
        for path in sorted(category_dir.iterdir()):
            kind = _KINDS.get(path.suffix)
            if kind is None or path.name.startswith(("_", ".")) or not path.is_file():
                continue
            entry = BuiltinJudge(name=path.stem, category=category_dir.name, kind=kind, path=path)
            if entry.name in found:
                raise BuiltinRegistryError(
                    f"builtin judge name collision: '{entry.name}' is in both "
                    f"{found[entry.name].category}/ and {entry.category}/"
                )
            if kind == "python" and not _defines_judge(path):
                raise BuiltinRegistryError(f"builtin judge {entry.qualified_name} must define a function 'judge'")
            found[entry.name] = entry
    return tuple(sorted(found.values(), key=lambda e: e.qualified_name))


@lru_cache(maxsize=1)
def available_builtins() -> tuple[BuiltinJudge, ...]:
    """Every shipped builtin judge."""
    return scan_builtins(BUILTINS_DIR)


def find_builtin(name: str, catalog: tuple[BuiltinJudge, ...] | None = None) -> BuiltinJudge | None:
    """Resolve a bare stem or `category/stem`; None when it names nothing."""
    catalog = available_builtins() if catalog is None else catalog
    category, _, stem = name.rpartition("/")
    entry = next((e for e in catalog if e.name == stem), None)
    if entry is None or (category and entry.category != category):
        return None
    return entry


def unknown_builtin_message(name: str, catalog: tuple[BuiltinJudge, ...] | None = None) -> str:
    catalog = available_builtins() if catalog is None else catalog
    available = ", ".join(e.qualified_name for e in catalog)
    category, _, stem = name.rpartition("/")
    actual = next((e for e in catalog if e.name == stem), None)
    if category and actual is not None:
        return (
            f"unknown builtin judge '{name}': '{stem}' is in category '{actual.category}', "
            f"not '{category}'. Available: {available}"
        )
    return f"unknown builtin judge '{name}'. Available: {available}"
