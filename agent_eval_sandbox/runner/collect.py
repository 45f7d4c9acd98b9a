"""Turning what came out of a sandbox into the run directory's case files.

Everything here works on host directories the sandbox was already copied out
to: the agent's workspace after the run, the pristine staged copy before it,
and `$HOME/.claude/projects` holding the session transcripts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.runner.changes import WorkspaceChanges, compare, diff_chunks


def _copy_file(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest, follow_symlinks=False)


def _copy_dir_files(src: Path, dest: Path) -> int:
    count = 0
    for path in sorted(src.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        _copy_file(path, dest / path.relative_to(src))
        count += 1
    return count


def collect_outputs(config: EvalConfig, workspace_after: Path, case_dir: Path) -> dict[str, int]:
    """Copy each outputs[].path from the workspace into cases/<id>/<path>."""
    counts: dict[str, int] = {}
    for output in config.outputs:
        if not output.path:
            continue
        source = workspace_after / output.path
        if source.is_symlink():
            counts[output.path] = 0
        elif source.is_dir():
            counts[output.path] = _copy_dir_files(source, case_dir / output.path)
        elif source.is_file():
            _copy_file(source, case_dir / output.path)
            counts[output.path] = 1
        else:
            counts[output.path] = 0
    return counts


def collect_changes(before: Path, after: Path, case_dir: Path, mounted: tuple[str, ...] = ()) -> WorkspaceChanges:
    """`_modified/` copies of changed and added files, and `workspace.diff`."""
    changes = compare(before, after, mounted)
    for rel in changes.changed:
        _copy_file(after / rel, case_dir / "_modified" / rel)
    # surrogateescape: a name that is not UTF-8 goes back to its own bytes, as git would show it.
    with open(case_dir / "workspace.diff", "w", encoding="utf-8", errors="surrogateescape") as diff:
        for chunk in diff_chunks(before, after, changes):
            diff.write(chunk)
    return changes


def collect_transcripts(projects_dir: Path, session_id: str | None, case_dir: Path) -> bool:
    """The session transcript as transcript.jsonl, other sessions' files under subagents/."""
    if not projects_dir.is_dir():
        return False
    found = False
    for path in sorted(projects_dir.rglob("*.jsonl")):
        if path.is_symlink() or not path.is_file():
            continue
        if session_id and path.stem == session_id and not found:
            _copy_file(path, case_dir / "transcript.jsonl")
            found = True
        else:
            _copy_file(path, case_dir / "subagents" / path.name)
    if not found and not session_id:
        # No result event (e.g. a timeout): the newest main transcript is the session.
        candidates = sorted((p for p in projects_dir.glob("*/*.jsonl") if p.is_file()), key=lambda p: p.stat().st_mtime)
        if candidates:
            _copy_file(candidates[-1], case_dir / "transcript.jsonl")
            found = True
    return found
