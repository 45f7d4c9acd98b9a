"""Passes when the agent read enough of the docs the case expects it to consult.

Required fields: events (traces.events), annotations.expected_files
Failure means: the fraction of `expected_files` read (Read, or Grep scoped to
the file) is below `min_coverage` (default 0.8). A case without
`expected_files` is "nothing to judge" (an error of this judge, not a pass).
"""

from __future__ import annotations

from typing import Any

from agent_eval_sandbox.judges.events import read_paths
from agent_eval_sandbox.judges.nothing import NothingToJudge

MATCHES = ("suffix", "exact", "basename")


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]


def _matches(expected: str, read: str, how: str) -> bool:
    want, got = _parts(expected), _parts(read)
    if not want or not got:
        return False
    if how == "exact":
        return want == got
    if how == "basename":
        return want[-1] == got[-1]
    # Whole path components only: docs/setup.md matches /abs/project/docs/setup.md,
    # report.md does not match final-report.md.
    return got[-len(want):] == want


def judge(
    outputs: dict[str, Any],
    min_coverage: float = 0.8,
    match: str = "suffix",
    include_subagents: bool = True,
    include_grep: bool = True,
    preloaded_files: list[str] | None = None,
    **_: Any,
) -> tuple[bool, str]:
    if match not in MATCHES:
        raise ValueError(f"consulted_docs: match must be one of {', '.join(MATCHES)}, not {match!r}")
    annotations = outputs.get("annotations") or {}
    expected = [f for f in annotations.get("expected_files") or [] if isinstance(f, str) and f]
    if not expected:
        raise NothingToJudge("the case's annotations list no expected_files")
    reads = read_paths(outputs.get("events") or [], include_subagents=include_subagents, include_grep=include_grep)
    reads += [p for p in preloaded_files or [] if isinstance(p, str)]
    consulted = [f for f in expected if any(_matches(f, r, match) for r in reads)]
    missing = [f for f in expected if f not in consulted]
    coverage = len(consulted) / len(expected)
    summary = f"read {len(consulted)}/{len(expected)} expected files ({coverage:.0%}, need {min_coverage:.0%})"
    if "events" not in outputs:
        summary += "; no event trace (traces.events is off)"
    if coverage >= min_coverage:
        return True, summary
    return False, f"{summary}; not read: {', '.join(missing)}"
