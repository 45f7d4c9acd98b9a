"""Opening a finished run directory (docs/run-directory.md) for judging and reports.

Everything in a run directory may be missing or damaged: a case that crashed
wrote half its files, and collected artifacts come from an untrusted sandbox.
Readers here never raise for a bad file; they return None and say why, so
the case still gets a record. Only a directory that is not a run at all is
an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.yaml_reader import YamlReadError, read_yaml_file
from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.rundir.layout import (
    RUN_JSON,
    RUN_RESULT,
    CaseDir,
    RunDir,
    is_case_id,
)
from agent_eval_sandbox.rundir.models import CaseOutcome, parse_outcome

MiB = 1024 * 1024
MAX_TEXT_BYTES = 16 * MiB  # per file read whole (results, hook outputs)
# What a judge's record holds of the agent's files and logs: per file and in
# total, so the host's memory stays flat whatever a case writes.
MAX_RECORD_FILE_BYTES = 4 * MiB
MAX_RECORD_FILES_BYTES = 16 * MiB
MAX_RECORD_LOG_BYTES = 4 * MiB
MAX_EVENTS_BYTES = 64 * MiB
MAX_EVENTS_NODES = 20_000_000


def read_text(path: Path, cap: int = MAX_TEXT_BYTES) -> str | None:
    """A text file (undecodable bytes replaced, cut at `cap`), or None if absent."""
    data = read_bytes(path, cap)
    if data is None:
        return None
    content, truncated = data
    text = content.decode("utf-8", errors="replace")
    return text + truncation_note(cap) if truncated else text


def read_bytes(path: Path, cap: int = MAX_TEXT_BYTES) -> tuple[bytes, bool] | None:
    """(first `cap` bytes, whether there were more), or None for a missing file or a symlink."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            content = handle.read(cap + 1)
    except OSError:
        return None
    return content[:cap], len(content) > cap


def truncation_note(cap: int) -> str:
    return f"\n[truncated: the file is larger than {cap // MiB} MiB]"


def not_loaded_note(cap: int) -> str:
    return f"[not loaded: the record already holds {cap // MiB} MiB of file contents]"


def read_data(path: Path, *, max_bytes: int = 8 * MiB, max_nodes: int = 200_000) -> tuple[Any, str | None]:
    """(parsed YAML/JSON or None, the problem if the file exists but is unusable)."""
    if path.is_symlink() or not path.is_file():
        return None, None
    try:
        return read_yaml_file(path, max_bytes=max_bytes, max_nodes=max_nodes), None
    except YamlReadError as exc:
        return None, exc.message


# The run's own records are written by this tool, one entry per case: a big run is a big file.
MAX_RECORD_BYTES = 256 * MiB
MAX_RECORD_NODES = 20_000_000


def read_mapping(
    path: Path, *, max_bytes: int = 8 * MiB, max_nodes: int = 200_000
) -> tuple[dict[str, Any], str | None]:
    data, problem = read_data(path, max_bytes=max_bytes, max_nodes=max_nodes)
    if data is None or isinstance(data, dict):
        return data or {}, problem
    return {}, f"{path}: expected a mapping, found a {type(data).__name__}"


def read_jsonl(path: Path, cap: int = MAX_TEXT_BYTES) -> list[dict[str, Any]]:
    """The JSON objects of a .jsonl file; damaged lines are skipped."""
    text = read_text(path, cap)
    entries: list[dict[str, Any]] = []
    for line in (text or "").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            entries.append(value)
    return entries


@dataclass(frozen=True)
class FinishedRun:
    """A run directory and its run-level records, as stored."""

    dir: RunDir
    meta: Mapping[str, Any]  # run.json
    result: Mapping[str, Any]  # run_result.json
    problems: tuple[str, ...] = ()

    @property
    def root(self) -> Path:
        return self.dir.root

    @property
    def run_id(self) -> str:
        run_id = self.meta.get("run_id")
        return run_id if isinstance(run_id, str) and run_id else self.root.name

    @property
    def config_path(self) -> Path | None:
        """The eval.yaml the run used, as run.json recorded it."""
        value = self.meta.get("config_path")
        if not isinstance(value, str) or not value:
            return None
        path = Path(value)
        return path if path.is_absolute() else self.root / path

    @property
    def is_batch(self) -> bool:
        return self.result.get("execution_mode") == "batch"

    def _per_case(self, case_id: str) -> Mapping[str, Any]:
        per_case = self.result.get("per_case")
        entry = per_case.get(case_id) if isinstance(per_case, Mapping) else None
        return entry if isinstance(entry, Mapping) else {}

    def outcome(self, case_id: str) -> CaseOutcome | None:
        """How the case ended: its own run_result.json, else run_result.json's per_case entry
        (a batch invocation's outcome stands for each of its cases)."""
        own, _ = read_mapping(self.dir.case(case_id).result, max_bytes=MAX_RECORD_BYTES, max_nodes=MAX_RECORD_NODES)
        for data in (own, self._per_case(case_id)):
            if data:
                outcome = parse_outcome(data)
                if outcome is not None:
                    return outcome
        return None

    @property
    def case_ids(self) -> list[str]:
        """Every case the run knows of: a directory under cases/, or a per_case entry.

        A case that crashed before its directory was written still has to be
        judged (and fail), so both sources count.
        """
        ids = set(self.dir.case_dirs())
        per_case = self.result.get("per_case")
        if isinstance(per_case, Mapping):
            ids.update(k for k in per_case if isinstance(k, str) and is_case_id(k))
        return sorted(ids)

    def case(self, case_id: str) -> CaseDir:
        return self.dir.case(case_id)


def open_finished_run(path: Path | str) -> FinishedRun:
    """Read run.json and run_result.json; a directory with neither is not a run."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise RunDirError(
            f"{root}: no such run directory" if not root.exists() else f"{root}: not a directory",
            fix="pass the directory a run wrote, e.g. eval/runs/<eval-name>/<run-id>",
        )
    run = RunDir(root.resolve())
    if not run.run_json.is_file() and not run.run_result.is_file():
        raise RunDirError(
            f"{root}: not a run directory (it has neither {RUN_JSON} nor {RUN_RESULT})",
            fix="pass the directory a run wrote, e.g. eval/runs/<eval-name>/<run-id>",
        )
    meta, meta_problem = read_mapping(run.run_json)
    result, result_problem = read_mapping(run.run_result, max_bytes=MAX_RECORD_BYTES, max_nodes=MAX_RECORD_NODES)
    problems = tuple(p for p in (meta_problem, result_problem) if p)
    return FinishedRun(dir=run, meta=meta, result=result, problems=problems)


def relative_files(directory: Path) -> list[str]:
    """Regular files under `directory` (symlinks neither followed nor listed), sorted, as relative paths."""
    found: list[str] = []
    for current, dirs, files in os.walk(directory, followlinks=False):
        dirs.sort()
        base = Path(current)
        for name in files:
            path = base / name
            if not path.is_symlink() and path.is_file():
                found.append(path.relative_to(directory).as_posix())
    return sorted(found)
