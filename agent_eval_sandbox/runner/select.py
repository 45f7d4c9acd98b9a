"""Which cases a run runs: `--case ID_OR_GLOB` (repeatable), then `--limit N` (pure)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TypeVar

from agent_eval_sandbox.errors import UserError

_GLOB_CHARS = frozenset("*?[")

T = TypeVar("T")


def matches(case_id: str, pattern: str) -> bool:
    """An exact id, or a shell glob over ids (case-sensitive, as ids are directory names)."""
    if _GLOB_CHARS.isdisjoint(pattern):
        return case_id == pattern
    return fnmatch.fnmatchcase(case_id, pattern)


def select_ids(ids: Sequence[str], patterns: Sequence[str] = (), limit: int | None = None) -> list[str]:
    """The ids a run takes, in dataset order: those matching any pattern (all, with none), the first
    `limit` of them. A pattern that matches nothing is an error: a typo must not quietly run nothing."""
    chosen = list(ids)
    if patterns:
        unmatched = [p for p in patterns if not any(matches(i, p) for i in ids)]
        if unmatched:
            shown = ", ".join(ids[:8]) + (", …" if len(ids) > 8 else "")
            raise UserError(f"--case {unmatched[0]!r} matches no case id (the ids: {shown})",
                            fix="give an id or a glob such as '00*' (quote it from the shell)")
        chosen = [i for i in ids if any(matches(i, p) for p in patterns)]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def select_items(items: Sequence[T], ids: Sequence[str], chosen: Sequence[str]) -> list[T]:
    """`items` (one per id, in the same order) narrowed to the chosen ids."""
    keep = set(chosen)
    return [item for item, item_id in zip(items, ids, strict=True) if item_id in keep]
