"""Judges scoped to a pipeline's step (`step: <id>`): what they see, and when they are not run.

A step-scoped judge scores the step's own trace — its events (tool calls,
conversation), final text, exit code, end reason, metrics, permission denials
and logs — while the files stay whole-case (the workspace as the last step left
it, `outputs[].path` and `_modified/`), as the reference says: "shared files
stay whole-case". A judge without `step:` sees the whole case.

A step that never started (an earlier step stopped the pipeline, the case's
deadline or budget ran out) is never a pass: its judges' results are
`not_run`; a step that started but did not end by itself is judged on what it
left, its results marked `incomplete`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agent_eval_sandbox.judges.record import CaseFiles
from agent_eval_sandbox.judges.standing import one_line
from agent_eval_sandbox.rundir.layout import CaseDir
from agent_eval_sandbox.rundir.models import CaseOutcome, StepOutcome
from agent_eval_sandbox.rundir.read import (
    MAX_EVENTS_BYTES,
    MAX_EVENTS_NODES,
    MAX_RECORD_LOG_BYTES,
    read_data,
    read_text,
)


def by_step(names_and_steps: Sequence[tuple[str, str | None]]) -> dict[str | None, list[str]]:
    """Judge names grouped by the step they score (None: the whole case), in config order."""
    groups: dict[str | None, list[str]] = {}
    for name, step in names_and_steps:
        groups.setdefault(step, []).append(name)
    return groups


def step_not_run_reason(outcome: CaseOutcome | None, step_id: str) -> tuple[str, str] | None:
    """(end_reason, the line every result of the step's judges gives) when the step's judges are not
    run: the step has no record or never started. None when it is judged."""
    step = outcome.step(step_id) if outcome is not None else None
    if step is None:
        return "error", f"not judged: step {step_id} has no recorded outcome"
    if not step.ran:
        why = step.skipped or step.error or step.end_reason
        return step.end_reason, f"not judged: step {step_id} did not run ({one_line(why)})"
    return None


def step_files(files: CaseFiles, step: StepOutcome, case_dir: CaseDir) -> CaseFiles:
    """The case's files with the trace replaced by the step's own (side effects: reads the step's folder)."""
    own = case_dir.step(step.step_id)
    data, problem = read_data(own.events, max_bytes=MAX_EVENTS_BYTES, max_nodes=MAX_EVENTS_NODES)
    events = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    return scoped_files(files, step.to_data(), events, read_text(own.stdout_log, MAX_RECORD_LOG_BYTES),
                        read_text(own.stderr_log, MAX_RECORD_LOG_BYTES),
                        (f"step {step.step_id}: {problem}",) if problem else ())


def scoped_files(files: CaseFiles, outcome: Mapping[str, Any], events: list[dict[str, Any]], stdout: str | None,
                 stderr: str | None, problems: tuple[str, ...] = ()) -> CaseFiles:
    """(pure) The case's files with the step's outcome, events and logs in place of the case's;
    the tool decisions are narrowed to the step's calls by `build_record` itself."""
    return dataclasses.replace(files, outcome=outcome, run_result=None, events=events, stdout=stdout, stderr=stderr,
                               problems=files.problems + problems)
