"""Batch mode: which output files belong to which case (pure).

One invocation writes every case's outputs into one workspace; `batch_pattern`
maps them back. `{n}` is the 1-based batch index (Python format specs work:
`RFE-{n:03d}`); a file belongs to a case when its name starts with the
expanded prefix; `*` gives every file to every case. Without a pattern, files
are grouped by a common `WORD-NNN` prefix, else assigned by position.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent_eval_sandbox.errors import ConfigError

_NUMBERED = re.compile(r"^([A-Za-z]+)-(\d+)")


def _case_indices(order: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[int]]]:
    """Each case id with the 1-based batch indices it owns."""
    indices, next_index = [], 1
    for entry in order:
        count = int(entry.get("entry_count", 1) or 1)
        indices.append((str(entry["case_id"]), list(range(next_index, next_index + count))))
        next_index += count
    return indices


def assign_files(files: Sequence[str], order: Sequence[Mapping[str, Any]], pattern: str) -> dict[str, list[str]]:
    """Map case id -> the relative file paths that belong to it."""
    cases = _case_indices(order)
    assigned: dict[str, list[str]] = {case_id: [] for case_id, _ in cases}
    names = sorted(files)
    if pattern == "*":
        return {case_id: list(names) for case_id in assigned}
    if pattern:
        for case_id, numbers in cases:
            try:
                prefixes = [pattern.format(n=n) for n in numbers]
            # e.g. {x}, {0}, {n:z}, {n.x}, {n[0]}: the pattern is config, not code
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
                raise ConfigError(
                    f"batch_pattern {pattern!r} cannot be expanded: {exc}",
                    field="outputs[].batch_pattern",
                    fix="use {n} with an optional format spec, e.g. RFE-{n:03d}",
                ) from None
            assigned[case_id] = [f for f in names if any(f.rsplit("/", 1)[-1].startswith(p) for p in prefixes)]
        return assigned
    groups: dict[int, list[str]] = {}
    for name in names:
        match = _NUMBERED.match(name.rsplit("/", 1)[-1])
        if match:
            groups.setdefault(int(match.group(2)), []).append(name)
    if groups:
        for case_id, numbers in cases:
            assigned[case_id] = [f for n in numbers for f in groups.get(n, [])]
        return assigned
    for (case_id, _), name in zip(cases, names, strict=False):
        assigned[case_id] = [name]
    return assigned
