"""The judges' `outputs` record of one case (docs/run-directory.md).

`read_case_files` gathers the raw material from the run directory and the
dataset (side effects, tolerant of anything missing); `build_record` turns it
into the record (pure). The record is plain JSON data: judge code receives it
in another process.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.dataset import ANNOTATIONS_NAMES, INPUT_NAMES
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.models import EvalConfig, OutputConfig, TracesConfig
from agent_eval_sandbox.judges.events import captured_tool_calls, conversation_text
from agent_eval_sandbox.rundir.layout import MODIFIED_DIR, CaseDir, RunDir, split_epoch
from agent_eval_sandbox.rundir.read import (
    MAX_EVENTS_BYTES,
    MAX_EVENTS_NODES,
    MAX_RECORD_BYTES,
    MAX_RECORD_FILE_BYTES,
    MAX_RECORD_FILES_BYTES,
    MAX_RECORD_LOG_BYTES,
    MAX_RECORD_NODES,
    FinishedRun,
    not_loaded_note,
    read_bytes,
    read_data,
    read_jsonl,
    read_mapping,
    read_text,
    relative_files,
    truncation_note,
)

METRIC_KEYS = ("exit_code", "duration_s", "token_usage", "cost_usd", "num_turns")


@dataclass(frozen=True)
class FileBytes:
    path: str  # relative to the case directory (artifacts) or to _modified/ (edits)
    content: bytes
    truncated: bool = False
    loaded: bool = True  # False: left out once the record's total was reached


class ReadBudget:
    """Bytes of file contents a record may still load (shared by every file of one case)."""

    def __init__(self, total: int = MAX_RECORD_FILES_BYTES, per_file: int = MAX_RECORD_FILE_BYTES) -> None:
        self.left = total
        self.total = total
        self.per_file = per_file

    def read(self, path: Path, rel: str) -> FileBytes | None:
        if self.left <= 0:
            return FileBytes(rel, b"", loaded=False) if path.is_file() and not path.is_symlink() else None
        data = read_bytes(path, min(self.per_file, self.left))
        if data is None:
            return None
        content, truncated = data
        self.left -= len(content)
        return FileBytes(rel, content, truncated)


@dataclass(frozen=True)
class CaseFiles:
    """Everything a case record is built from, as read from disk."""

    case_id: str
    case_dir: Path  # absolute
    artifacts: tuple[FileBytes, ...] = ()
    modified: tuple[FileBytes, ...] = ()
    outcome: Mapping[str, Any] | None = None  # how the case ended (rundir.models.CaseOutcome's data)
    run_result: Mapping[str, Any] | None = None  # run_result.json itself: a batch run's fallback
    events: list[dict[str, Any]] | None = None
    stdout: str | None = None
    stderr: str | None = None
    inputs: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    hook_outputs: Mapping[str, Any] = field(default_factory=dict)
    tool_decisions: tuple[dict[str, Any], ...] = ()
    problems: tuple[str, ...] = ()


def to_jsonable(value: Any) -> Any:
    """YAML data as JSON data: dates become ISO strings, keys strings, sets lists."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def _decode(item: FileBytes) -> str | None:
    """The file as text, None if it is not UTF-8 text."""
    if not item.loaded:
        return not_loaded_note(MAX_RECORD_FILES_BYTES)
    content = item.content
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A cap may cut the last character in two: that alone does not make a text file binary.
        if not (item.truncated and exc.start >= len(content) - 3 and exc.reason == "unexpected end of data"):
            return None
        text = content[: exc.start].decode("utf-8")
    return text + truncation_note(MAX_RECORD_FILE_BYTES) if item.truncated else text


def _binary_marker(path: Path) -> dict[str, Any]:
    return {"_binary": True, "path": str(path), "name": path.name}


def _first(key: str, sources: Sequence[Mapping[str, Any] | None]) -> Any:
    for source in sources:
        if source is not None and source.get(key) is not None:
            return source[key]
    return None


def _result_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    result = value.get("result") if isinstance(value, Mapping) else None
    return result if isinstance(result, str) else ""


def _convenience_keys(files: CaseFiles, outputs: Sequence[OutputConfig]) -> dict[str, str]:
    """`<dir>_content` / `<dir>_file`: the first file directly in each outputs[].path."""
    keys: dict[str, str] = {}
    for output in outputs:
        if not output.path:
            continue
        prefix = Path(output.path)
        direct = [a for a in files.artifacts if Path(a.path).parent == prefix or Path(a.path) == prefix]
        if not direct:
            continue
        text = _decode(direct[0])
        if text is not None:
            keys[f"{prefix.name}_content"] = text
            keys[f"{prefix.name}_file"] = str(files.case_dir / direct[0].path)
    return keys


def build_record(files: CaseFiles, outputs: Sequence[OutputConfig], traces: TracesConfig) -> dict[str, Any]:
    """The `outputs` record judges receive (pure; JSON-serialisable)."""
    record: dict[str, Any] = {"files": {}, "modified_files": {}}
    record["files_truncated"] = sorted(
        {f.path for f in files.artifacts if f.truncated or not f.loaded}
        | {f"{MODIFIED_DIR}/{f.path}" for f in files.modified if f.truncated or not f.loaded}
    )
    for item in files.artifacts:
        text = _decode(item)
        record["files"][item.path] = text if text is not None else _binary_marker(files.case_dir / item.path)
    for item in files.modified:
        text = _decode(item)
        key = f"{MODIFIED_DIR}/{item.path}"
        if text is None:
            record["files"][key] = _binary_marker(files.case_dir / MODIFIED_DIR / item.path)
        else:
            record["files"][key] = text
            record["modified_files"][item.path] = text
    record.update(_convenience_keys(files, outputs))

    # The case's outcome first; a batch run's single invocation stands in for every case.
    sources = [files.outcome, files.run_result]
    events = files.events or []
    patterns = [o.tool for o in outputs if o.tool]
    record["tool_calls"] = captured_tool_calls(events, patterns or None)
    record["annotations"] = to_jsonable(files.annotations)
    record["inputs"] = to_jsonable(files.inputs or {})
    record["conversation"] = conversation_text(events) if events else _result_text(_first("result", sources))
    if traces.events:
        record["events"] = events
    if traces.metrics:
        for key in METRIC_KEYS:
            record[key] = to_jsonable(_first(key, sources))
    if traces.stdout and files.stdout is not None:
        record["stdout"] = files.stdout
    if traces.stderr and files.stderr is not None:
        record["stderr"] = files.stderr
    record["hook_outputs"] = to_jsonable(files.hook_outputs)
    record["case_dir"] = str(files.case_dir)
    record["end_reason"] = to_jsonable(_first("end_reason", sources))
    record["limits_hit"] = to_jsonable(_first("limits_hit", sources) or [])
    record["tool_decisions"] = to_jsonable(decisions_of_calls(files.tool_decisions, events))
    record["permission_denials"] = to_jsonable(_first("permission_denials", sources) or [])
    return record


def decisions_of_calls(decisions: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The broker's decisions about tool calls the conversation has.

    The broker's socket is reachable from the sandbox, so its log may hold requests the
    agent sent itself; a decision counts only for a call of the (checked) conversation,
    by id and tool name.
    """
    calls = {(tool.get("id"), tool.get("name")) for event in events if event.get("type") == "assistant"
             for tool in event.get("tools") or [] if isinstance(tool, Mapping)}
    return [d for d in decisions if (d.get("tool_use_id"), d.get("tool_name")) in calls]


def _read_files(root: Path, base: Path, budget: ReadBudget) -> tuple[FileBytes, ...]:
    """Files under `base` (a directory or one file), paths relative to `root`, within the budget."""
    if base.is_symlink():
        return ()
    if base.is_file():
        paths = [base]
    elif base.is_dir():
        paths = [base / rel for rel in relative_files(base)]
    else:
        return ()
    items = []
    for path in paths:
        item = budget.read(path, path.relative_to(root).as_posix())
        if item is not None:
            items.append(item)
    return tuple(items)


def _first_existing(directory: Path, names: Sequence[str]) -> Path | None:
    return next((directory / n for n in names if (directory / n).is_file()), None)


def _events(case: CaseDir, run: RunDir) -> tuple[list[dict[str, Any]] | None, str | None]:
    for path in (case.events, run.batch_logs.events):
        if path.is_file():
            data, problem = read_data(path, max_bytes=MAX_EVENTS_BYTES, max_nodes=MAX_EVENTS_NODES)
            if problem:
                return None, problem
            if not isinstance(data, list):
                return None, f"{path}: events.json is not a list"
            return [e for e in data if isinstance(e, dict)], None
    return None, None


def _hook_outputs(run: FinishedRun, case: CaseDir, case_id: str) -> tuple[dict[str, Any], list[str]]:
    """`outputs["hook_outputs"]`: before_all's data, then the case's (later keys win)."""
    run_level, problem = read_mapping(run.dir.hook_outputs)
    own, own_problem = read_mapping(case.hook_outputs)
    before_all = run_level.get("before_all")
    cases = run_level.get("cases")
    from_run = cases.get(case_id) if isinstance(cases, dict) else None
    merged: dict[str, Any] = {}
    for part in (before_all, from_run, own):
        if isinstance(part, dict):
            merged.update(part)
    return merged, [p for p in (problem, own_problem) if p]


def read_case_files(run: FinishedRun, case_id: str, loaded: LoadedConfig) -> CaseFiles:
    """Gather one case's material; anything missing is simply absent."""
    config: EvalConfig = loaded.config
    case = CaseDir(run.case(case_id).path.resolve())
    case_dir = case.path
    problems: list[str] = []

    budget = ReadBudget()
    artifacts: list[FileBytes] = []
    for output in config.outputs:
        if output.path:
            artifacts.extend(_read_files(case_dir, case.output(output.path), budget))
    modified = tuple(
        FileBytes(str(Path(f.path).relative_to(MODIFIED_DIR).as_posix()), f.content, f.truncated, f.loaded)
        for f in _read_files(case_dir, case.modified, budget)
    )

    outcome = run.outcome(case_id)
    _, problem = read_mapping(case.result, max_bytes=MAX_RECORD_BYTES, max_nodes=MAX_RECORD_NODES)
    problems += [problem] if problem else []
    if case.result.is_file() and outcome is None and not problem:
        problems.append(f"{case.result}: not a case result this tool wrote")
    events, problem = _events(case, run.dir)
    problems += [problem] if problem else []

    dataset_case = loaded.dataset_dir / case_id
    if not dataset_case.is_dir():  # an epoch of a case (`run --epochs`): the case's own directory
        dataset_case = loaded.dataset_dir / split_epoch(case_id)[0]
    input_file = case.input if case.input.is_file() else _first_existing(dataset_case, INPUT_NAMES)
    inputs, problem = read_mapping(input_file) if input_file else ({}, None)
    problems += [problem] if problem else []
    annotations_file = _first_existing(dataset_case, ANNOTATIONS_NAMES)
    annotations, problem = read_mapping(annotations_file) if annotations_file else ({}, None)
    problems += [problem] if problem else []
    hook_outputs, hook_problems = _hook_outputs(run, case, case_id)
    problems += hook_problems

    def log(own: Path, batch: Path) -> str | None:
        text = read_text(own, MAX_RECORD_LOG_BYTES)
        return text if text is not None else read_text(batch, MAX_RECORD_LOG_BYTES)

    return CaseFiles(
        case_id=case_id,
        case_dir=case_dir,
        artifacts=tuple(artifacts),
        modified=modified,
        outcome=outcome.to_data() if outcome is not None else None,
        run_result=run.result if (run.is_batch or config.is_batch) else None,
        events=events,
        stdout=log(case.stdout_log, run.dir.batch_logs.stdout_log),
        stderr=log(case.stderr_log, run.dir.batch_logs.stderr_log),
        inputs=inputs,
        annotations=annotations,
        hook_outputs=hook_outputs,
        tool_decisions=tuple(read_jsonl(case.tool_decisions)),
        problems=tuple(problems),
    )
