"""What report.html shows, as plain values: the run's header facts and each case's material.

`report/facts.py` reads these from a run directory (the I/O edge); the
`report/html*.py` renderers are pure functions of them. Everything here may
come from the untrusted sandbox (file names, texts, tool inputs): the
renderers escape all of it, and the readers have already cut it to size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_eval_sandbox.rundir.models import CaseOutcome


@dataclass(frozen=True)
class FileView:
    """The start of one file as the report shows it."""

    path: str  # relative to the run directory, e.g. cases/c1/artifacts/out.md
    size: int  # bytes of the whole file
    text: str | None  # None: binary, not shown
    truncated: bool = False  # `text` is only the file's first part


@dataclass(frozen=True)
class RunView:
    """The run header: what ran, with what, how it went."""

    eval: str
    run_id: str
    root: str  # the run directory, where the full files are
    model: str | None = None
    offline: bool | None = None  # None: run.json does not say
    claude_version: str | None = None
    image: str | None = None
    mode: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    started_at: float | None = None
    wall_clock_s: float | None = None
    token_usage: Mapping[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    has_result: bool = False  # run_result.json was written
    interrupted: bool = False
    planned: int | None = None
    finished: int | None = None
    problems: tuple[str, ...] = ()  # run.json / run_result.json that could not be read
    batch: CaseView | None = None  # batch mode: the single invocation's conversation


@dataclass(frozen=True)
class CaseView:
    """One case's material: how it ended, what it was asked, what it did and left."""

    case_id: str
    location: str  # its directory relative to the run directory
    outcome: CaseOutcome | None = None
    prompt: FileView | None = None
    input: FileView | None = None
    events: Sequence[Mapping[str, Any]] | None = None
    events_note: str | None = None  # why there is no conversation, or where it is
    files: tuple[FileView, ...] = ()  # collected outputs and _modified/
    files_not_shown: int = 0  # beyond the listing cap
    diff: FileView | None = None
    present: tuple[str, ...] = ()  # the case's own files (logs, transcript…), for "find the rest"
