"""Reading YAML (and JSON) files that may be hostile, with one-line errors.

eval.yaml, input.yaml, batch.yaml, scripts and `.hook-outputs.*` all pass
through here. `yaml.safe_load` builds anchors as shared references, so a
"billion laughs" file is small in memory but explodes for anything that walks
it (pydantic, json.dumps, templating). We therefore cap the file size and the
*expanded* node count, and reject self-referencing structures, before any
other code sees the data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent_eval_sandbox.errors import UserError

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_NODES = 200_000


class YamlReadError(UserError):
    """A YAML/JSON file is unreadable, malformed or too large."""

    def __init__(self, path: Path | str, problem: str, *, fix: str | None = None) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {problem}", fix=fix)


def _expanded_size(root: Any, limit: int) -> int:
    """Node count with shared references counted every time they occur.

    Memoised by object id so a DAG of aliases is measured in linear time; a
    cycle (`&a [*a]`) is reported as an error instead of recursing forever.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def visit(node: Any) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise ValueError("the document refers to itself (a recursive YAML alias)")
        on_path.add(key)
        children = list(node.keys()) + list(node.values()) if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += visit(child)
            if total > limit:
                break
        on_path.discard(key)
        sizes[key] = total
        return total

    return visit(root)


def parse_yaml_text(
    text: str,
    source: Path | str,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Any:
    """Parse YAML text; errors name `source` and the line."""
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or str(exc)
        raise YamlReadError(source, f"invalid YAML{where}: {problem}", fix="fix the syntax there") from exc
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise YamlReadError(source, f"invalid YAML: {exc}".splitlines()[0], fix="fix the syntax") from exc
    try:
        size = _expanded_size(data, max_nodes)
    except ValueError as exc:
        raise YamlReadError(source, str(exc), fix="remove the self-referencing alias") from exc
    except RecursionError as exc:
        raise YamlReadError(source, "the document is nested too deeply", fix="flatten it") from exc
    if size > max_nodes:
        raise YamlReadError(
            source,
            f"the document expands to more than {max_nodes} nodes (YAML aliases multiply it)",
            fix="remove repeated aliases or split the file",
        )
    return data


def read_yaml_file(
    path: Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> Any:
    """Read a YAML file (JSON is YAML too) with size and expansion caps."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError as exc:
        raise YamlReadError(path, "file not found", fix="check the path") from exc
    except IsADirectoryError as exc:
        raise YamlReadError(path, "is a directory, not a file") from exc
    except OSError as exc:
        raise YamlReadError(path, f"cannot read: {exc.strerror}") from exc
    if len(raw) > max_bytes:
        raise YamlReadError(path, f"file is larger than {max_bytes} bytes", fix="make it smaller")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlReadError(path, f"not UTF-8 text (byte {exc.start})", fix="save it as UTF-8") from exc
    if path.suffix == ".json":
        try:
            data = json.loads(text) if text.strip() else None
        except (json.JSONDecodeError, RecursionError) as exc:
            if isinstance(exc, json.JSONDecodeError):
                detail = f"invalid JSON at line {exc.lineno}: {exc.msg}"
            else:
                detail = "JSON nested too deeply"
            raise YamlReadError(path, detail, fix="fix the syntax there") from exc
        if _expanded_size(data, max_nodes) > max_nodes:
            raise YamlReadError(path, f"the document has more than {max_nodes} nodes")
        return data
    return parse_yaml_text(text, path, max_nodes=max_nodes)


def read_yaml_mapping(path: Path, *, what: str = "file", **caps: int) -> dict[str, Any]:
    """Read a file that must hold a mapping (an empty file is an empty mapping)."""
    data = read_yaml_file(path, **caps)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise YamlReadError(
            path,
            f"{what} must be a mapping of keys to values, not a {type(data).__name__}",
            fix="write it as `key: value` lines",
        )
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        raise YamlReadError(path, f"{what} keys must be strings (found {bad_keys[0]!r})", fix="quote the key")
    return data


@dataclass(frozen=True)
class DuplicateKey:
    """A mapping key written twice: YAML loaders (PyYAML, json) silently keep the last value."""

    key: str
    where: str  # the mapping's place in the document, e.g. "execution" or "judges[1]" ("" at the top)
    line: int  # 1-based line of the repeated key
    first_line: int  # 1-based line of its first occurrence (0 when unknown, as in JSON)

    def describe(self) -> str:
        place = f"{self.where}.{self.key}" if self.where else self.key
        lines = f" (lines {self.first_line} and {self.line})" if self.first_line else ""
        return f"key '{place}' is written twice{lines}; only the last value counts"


def _index(where: str, index: int) -> str:
    return f"{where}[{index}]" if where else f"[{index}]"


def _child(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _yaml_duplicates(root: yaml.Node | None) -> list[DuplicateKey]:
    """Walk the composed node graph depth-first in document order (an alias is the node of its
    anchor, visited once, where the anchor is written)."""
    found: list[DuplicateKey] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, where = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[yaml.Node, str]] = []
        if isinstance(node, yaml.SequenceNode):
            children = [(item, _index(where, i)) for i, item in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    ident = (key_node.tag, key_node.value)
                    line = key_node.start_mark.line + 1
                    if ident in first:
                        found.append(DuplicateKey(key_node.value, where, line, first[ident]))
                    else:
                        first[ident] = line
                    children.append((value_node, _child(where, str(key_node.value))))
                else:
                    children.append((value_node, where))
        stack.extend(reversed(children))
    return sorted(found, key=lambda d: d.line)


def _json_duplicates(text: str) -> list[DuplicateKey]:
    found: list[DuplicateKey] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys: set[str] = set()
        for key, _ in items:
            if key in keys:
                found.append(DuplicateKey(key, "", 0, 0))
            keys.add(key)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return found


def find_duplicate_keys(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[DuplicateKey]:
    """Keys written twice in one mapping of a YAML or JSON file.

    A lint over a file the readers above accept: unreadable or malformed files
    are reported by them, so here they have no duplicates.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
        if len(raw) > max_bytes:
            return []
        text = raw.decode("utf-8")
        if path.suffix == ".json":
            return _json_duplicates(text) if text.strip() else []
        return _yaml_duplicates(yaml.compose(text, Loader=yaml.SafeLoader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError):
        return []
