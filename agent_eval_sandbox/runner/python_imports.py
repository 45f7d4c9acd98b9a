"""Which files of a project a Python module needs, read statically (no code is run).

A judge `module:` is imported in the judge worker with the project root first
on sys.path, so `a.b.c` is `<root>/a/b/c.py` or `<root>/a/b/c/__init__.py`,
and importing it runs `a/__init__.py` and `a/b/__init__.py` too. Its helpers
are the project modules it imports, found by reading `import` and `from ...
import` statements (relative ones included), transitively. Imports built at
run time (`importlib.import_module(name)`, `__import__`) are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

MAX_FILES = 500  # a judge that imports more of the project than this is cut off, not followed forever


def is_file(path: Path) -> bool:
    """`Path.is_file`, with an unreadable directory on the way counting as "no"."""
    try:
        return path.is_file()
    except OSError:
        return False


def module_file(root: Path, name: str) -> Path | None:
    """The file `name` imports from under `root`, or None when it is not the project's."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    base = root.joinpath(*parts)
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if is_file(candidate):
            return candidate
    return None


def package_inits(root: Path, name: str) -> list[Path]:
    """The `__init__.py` of every package above module `name` that exists under `root`."""
    parts = name.split(".")
    found = []
    for depth in range(1, len(parts)):
        init = root.joinpath(*parts[:depth], "__init__.py")
        if is_file(init):
            found.append(init)
    return found


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_names(path: Path, name: str) -> set[str]:
    """Absolute names of the modules `path` (module `name`) imports, and of what it imports from them."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                found.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
            else:
                base = []
            head = [*base, *(node.module.split(".") if node.module else [])]
            if head:
                found.update(".".join(head[: i + 1]) for i in range(len(head)))
            # `from pkg import sub` may name a submodule
            found.update(".".join([*head, alias.name]) for alias in node.names if alias.name != "*")
    return {n for n in found if n}


def project_files_of(root: Path, name: str) -> set[Path]:
    """The project files that importing module `name` runs: itself, its packages' `__init__.py`,
    and every project module it imports, transitively."""
    start = module_file(root, name)
    if start is None:
        return set()
    seen: set[Path] = set()
    queue = [start, *package_inits(root, name)]
    while queue and len(seen) < MAX_FILES:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        for imported in imported_names(path, _module_name(root, path)):
            target = module_file(root, imported)
            if target is not None:
                queue.append(target)
                queue.extend(package_inits(root, imported))
    return seen
