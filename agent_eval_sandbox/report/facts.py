"""Reading what report.html shows from a run directory (the I/O edge of the report).

Every file may be missing, damaged, huge or hostile (collected from the
sandbox): each is read only up to a cap, never followed through a symlink,
and what cannot be used becomes a note instead of an exception. The values
returned (`report/view.py`) are what the pure renderers get.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_eval_sandbox.report.view import CaseView, FileView, RunView
from agent_eval_sandbox.rundir.layout import CASE_RECORDS, CaseDir, RunDir, is_case_id, relative_link
from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.rundir.read import (
    MAX_EVENTS_BYTES,
    MAX_EVENTS_NODES,
    FinishedRun,
    read_bytes,
    read_data,
    relative_files,
)

KiB = 1024
# How much of each file is read; the renderer cuts again to what the page holds.
PROMPT_BYTES = 64 * KiB
INPUT_BYTES = 64 * KiB
OUTPUT_FILE_BYTES = 64 * KiB
DIFF_BYTES = 256 * KiB
MAX_FILES = 200  # output files listed per case
_SNIFF = 8 * KiB


def _decode(content: bytes, truncated: bool) -> str | None:
    """The text of a file's start, or None when it looks binary."""
    if b"\x00" in content[:_SNIFF]:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(content) - 3:  # the cap split a character
            return content[: exc.start].decode("utf-8", errors="replace")
        text = content.decode("utf-8", errors="replace")
        return None if text.count("\ufffd") > max(8, len(text) // 100) else text


def read_file_view(run: RunDir, path: Path, cap: int) -> FileView | None:
    data = read_bytes(path, cap)
    if data is None:
        return None
    content, truncated = data
    try:
        size = path.stat().st_size
    except OSError:
        size = len(content)
    return FileView(path=relative_link(run, path), size=size, text=_decode(content, truncated), truncated=truncated)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _events(path: Path) -> tuple[list[dict[str, Any]] | None, str | None]:
    if not path.is_file():
        return None, None
    data, problem = read_data(path, max_bytes=MAX_EVENTS_BYTES, max_nodes=MAX_EVENTS_NODES)
    if problem:
        return None, problem
    if not isinstance(data, list):
        return None, f"{path.name} is not a list of events"
    return [e for e in data if isinstance(e, dict)], None


def _output_files(run: RunDir, case: CaseDir) -> tuple[tuple[FileView, ...], int]:
    """What the case collected from the sandbox: every file of the case directory that is not the tool's own."""
    if not case.path.is_dir() or case.path.is_symlink():
        return (), 0
    own = set(CASE_RECORDS)
    names = [n for n in relative_files(case.path) if n.split("/", 1)[0] not in own]
    views = (read_file_view(run, case.path / name, OUTPUT_FILE_BYTES) for name in names[:MAX_FILES])
    return tuple(v for v in views if v is not None), max(0, len(names) - MAX_FILES)


def read_case_view(run: FinishedRun, case_id: str) -> CaseView:
    """Everything report.html shows of one case."""
    root = run.dir
    case = run.case(case_id)
    if not is_case_id(case_id):  # e.g. an edited summary.json: never read outside cases/
        return CaseView(case_id=case_id, location=relative_link(run.dir, run.dir.cases),
                        events_note="not a case id this tool writes: nothing of it is read")
    batch = run.is_batch
    events, problem = (None, None) if batch else _events(case.events)
    note = problem
    if batch:
        note = "batch mode: the conversation of the run's single invocation is shown once, above"
    elif events is None and problem is None:
        note = f"no {case.events.name}: the agent's conversation was not recorded"
    files, not_shown = _output_files(root, case)
    prompt = read_file_view(root, case.prompt, PROMPT_BYTES)
    if prompt is None and batch:
        prompt = read_file_view(root, run.dir.batch_logs.prompt, PROMPT_BYTES)
    return CaseView(
        case_id=case_id,
        location=relative_link(run.dir, case.path),
        outcome=run.outcome(case_id),
        prompt=prompt,
        input=read_file_view(root, case.input, INPUT_BYTES),
        events=events,
        events_note=note,
        files=files,
        files_not_shown=not_shown,
        diff=read_file_view(root, case.workspace_diff, DIFF_BYTES),
        present=tuple(name for name in CASE_RECORDS if (case.path / name).exists()),
    )


def _batch_view(run: FinishedRun) -> CaseView | None:
    if not run.is_batch:
        return None
    logs = run.dir.batch_logs
    events, problem = _events(logs.events)
    outcome: CaseOutcome | None = None
    cases = run.case_ids
    if cases:
        outcome = run.outcome(cases[0])
    return CaseView(case_id="batch invocation", location=".", outcome=outcome, events=events,
                    events_note=problem or (None if events is not None else "no events.json at the run's root"),
                    present=tuple(name for name in CASE_RECORDS if (logs.path / name).exists()))


def read_run_view(run: FinishedRun, eval_name: str) -> RunView:
    """The run header: run.json (what ran) and run_result.json (how it went)."""
    meta, result = run.meta, run.result
    settings = meta.get("settings")
    settings = dict(settings) if isinstance(settings, Mapping) else {}
    offline = meta.get("offline")
    started = _num(meta.get("started_at"))
    return RunView(
        eval=_str(meta.get("eval")) or eval_name,
        run_id=run.run_id,
        root=str(run.root),
        model=_str(settings.get("model")) or _str(result.get("model")),
        offline=offline if isinstance(offline, bool) else None,
        claude_version=_str(meta.get("claude_version")) or _str(result.get("agent_version")),
        image=_str(meta.get("image")),
        mode=_str(meta.get("mode")) or _str(result.get("execution_mode")),
        settings=settings,
        started_at=started,
        wall_clock_s=_num(result.get("wall_clock_s")),
        token_usage=_usage(result.get("token_usage")),
        cost_usd=_num(result.get("cost_usd")),
        has_result=run.dir.run_result.is_file(),
        interrupted=result.get("interrupted") is True,
        planned=_int(result.get("planned")),
        finished=_int(result.get("finished")),
        problems=run.problems,
        batch=_batch_view(run),
    )
