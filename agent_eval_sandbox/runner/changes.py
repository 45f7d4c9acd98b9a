"""What the agent changed in its workspace: the before/after comparison (pure).

The host keeps the pristine staged copy; after the run the workspace is copied
out and compared file by file. Changed and added files are kept as
`_modified/` copies and all changes as one unified diff (`workspace.diff`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval_sandbox.git_names import is_git_dir_name

# Harness scaffolding, never reported as the agent's edits (as in the reference).
SCAFFOLDING_PREFIXES = (".claude/", ".staged-plugins/", "subagents/", "hooks/", ".work/")
MAX_DIFF_FILE_BYTES = 1024 * 1024
# The whole diff: past it, the remaining files are only named. Whatever the agent
# writes, the host never holds or writes more than this of it as a diff.
MAX_DIFF_BYTES = 16 * 1024 * 1024


class CollectionInterrupted(Exception):
    """Collecting a case's files from its copied-out workspace stopped part-way because the run was
    interrupted (Ctrl-C/SIGTERM): what the agent left is not waited for, however much of it there is.
    `changes`: the comparison, when it was complete before the stop."""

    def __init__(self, message: str, changes: WorkspaceChanges | None = None) -> None:
        super().__init__(message)
        self.changes = changes


def check_stop(stop: threading.Event | None, what: str, changes: WorkspaceChanges | None = None) -> None:
    if stop is not None and stop.is_set():
        raise CollectionInterrupted(f"collecting the case's files stopped {what}: the run was interrupted", changes)


def _files(root: Path, stop: threading.Event | None) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        check_stop(stop, "while comparing the workspace")
        # git metadata is never collected (the copy-out leaves it out), so it is no change either:
        # a repo-mode workspace starts with a .git the host made.
        dirnames[:] = sorted(d for d in dirnames if not is_git_dir_name(d))
        for name in sorted(n for n in filenames if not is_git_dir_name(n)):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            found[path.relative_to(root).as_posix()] = path
    return found


def _digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def _is_scaffolding(rel: str) -> bool:
    return rel.startswith(SCAFFOLDING_PREFIXES) or rel in (".hook-outputs.yaml", ".hook-outputs.json")


@dataclass
class WorkspaceChanges:
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[str]:
        return sorted(self.added + self.modified)

    def as_dict(self) -> dict[str, list[str]]:
        return {"added": self.added, "modified": self.modified, "deleted": self.deleted}


def compare(before: Path, after: Path, mounted: tuple[str, ...] = (),
            stop: threading.Event | None = None) -> WorkspaceChanges:
    """What changed between the staged workspace and the one copied out.

    `mounted` are workspace-relative paths of the read-only project resources:
    the copy-out holds them, the agent cannot change them, and they are not its work.
    Once `stop` is set, raises CollectionInterrupted.
    """
    old, new = _files(before, stop), _files(after, stop)
    changes = WorkspaceChanges()
    mounts = tuple(m.rstrip("/") for m in mounted)
    for rel in sorted(set(old) | set(new)):
        check_stop(stop, "while comparing the workspace")
        if _is_scaffolding(rel) or any(rel == m or rel.startswith(m + "/") for m in mounts):
            continue
        if rel not in new:
            changes.deleted.append(rel)
        elif rel not in old:
            changes.added.append(rel)
        elif old[rel].stat().st_size != new[rel].stat().st_size or _digest(old[rel]) != _digest(new[rel]):
            changes.modified.append(rel)
    return changes


def _text_lines(path: Path | None) -> list[str] | None:
    if path is None:
        return []
    if path.stat().st_size > MAX_DIFF_FILE_BYTES:
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r",
              '"': '\\"', "\\": "\\\\"}


def quote_path(path: str) -> str:
    """A path as a diff header shows it: quoted and C-escaped, as git does, when it holds a
    control character, a quote or a backslash. The agent chooses its file names: unquoted, a
    name with line breaks could spell out diff lines of its own."""
    if not any(ord(c) < 0x20 or c in '"\\' or ord(c) == 0x7F for c in path):
        return path
    return '"' + "".join(_C_ESCAPES.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                         for c in path) + '"'


def diff_chunks(before: Path, after: Path, changes: WorkspaceChanges, max_bytes: int = MAX_DIFF_BYTES,
                stop: threading.Event | None = None) -> Iterator[str]:
    """The unified diff, file by file; once `max_bytes` is reached the rest is one closing note.

    Once `stop` is set, the closing note says so, then CollectionInterrupted is raised."""
    names = sorted(changes.added + changes.modified + changes.deleted)
    # Sets: a list's `in` made 40,000 added files take 10 s of the host's CPU (quadratic).
    added, deleted = set(changes.added), set(changes.deleted)
    written = 0
    for index, rel in enumerate(names):
        if stop is not None and stop.is_set():
            yield (f"[agent-eval-sandbox: diff stopped: the run was interrupted; "
                   f"{len(names) - index} more changed file(s) not shown]\n")
            raise CollectionInterrupted(f"collecting the case's files stopped after the diff of {index} of "
                                        f"{len(names)} changed files: the run was interrupted", changes)
        old = before / rel if rel not in added else None
        new = after / rel if rel not in deleted else None
        old_lines, new_lines = _text_lines(old), _text_lines(new)
        if old_lines is None or new_lines is None:
            chunk = f"Binary or large file {quote_path(rel)} changed\n"
        else:
            diff = difflib.unified_diff(
                old_lines, new_lines,
                fromfile="/dev/null" if old is None else quote_path(f"a/{rel}"),
                tofile="/dev/null" if new is None else quote_path(f"b/{rel}"),
            )
            chunk = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
        if written + len(chunk) > max_bytes:
            yield (f"[agent-eval-sandbox: diff truncated at {max_bytes // (1024 * 1024)} MiB; "
                   f"{len(names) - index} more changed file(s) not shown]\n")
            return
        written += len(chunk)
        yield chunk


def unified_diff(before: Path, after: Path, changes: WorkspaceChanges, max_bytes: int = MAX_DIFF_BYTES) -> str:
    return "".join(diff_chunks(before, after, changes, max_bytes))
