"""Staging on the host what each sandbox gets: the case workspace and the
read-only project resources (skills, plugins, CLAUDE.md).

Everything is copied, never linked, and symlinks are never followed out of
their source: a link inside a dataset or plugin must not smuggle a host file
(or the answer key) into the sandbox. Paths a deny rule names are left out
entirely: the OS-level half of `permissions.deny` / `sandbox.filesystem.denyRead`.
So is the answer key (`answer_key.AnswerKey`), wherever it sits among the
resources or in a repo-mode copy of the project; and a project's `.git` never
goes in (a repo-mode copy gets a fresh history instead, see `repo_history`).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from agent_eval_sandbox.config.dataset import Case
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.paths import ProjectPaths, workspace_file
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.sandbox.archive import SkippedEntry, special_file_kind

DeniedPredicate = Callable[[str], bool]

# What the reference links into every case workspace from the project root.
PROJECT_RESOURCES = ("CLAUDE.md", "scripts", "skills", ".context")
# Sub-directories of the project's .claude/ that define skills, agents and commands.
CLAUDE_RESOURCES = ("skills", "agents", "commands")
# Never copied anywhere, whatever the config says.
ALWAYS_SKIPPED = {".git", "node_modules", "__pycache__", ".venv"}


def _never_denied(_: str) -> bool:
    return False


class Exclusion(Protocol):
    """What never enters a sandbox, by absolute source path (the answer key)."""

    def covers(self, path: Path, st: os.stat_result | None = None) -> bool: ...


@dataclass
class StagingReport:
    """What staging copied on the host, and what it left out.

    Not the sandbox's copy reports (`sandbox.archive.CopyInReport` / `CopyOutReport`):
    this one accumulates over several sources and names the answer key's paths.
    `skipped` kinds: "denied" (a deny rule), "answer_key", "symlink", "outside"
    (not inside the case directory), and what is not a regular file ("fifo", "socket", "device", "other").
    """

    files: int = 0
    bytes: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    excluded: list[Path] = field(default_factory=list)  # absolute source paths the Exclusion left out

    def add(self, other: StagingReport) -> None:
        self.files += other.files
        self.bytes += other.bytes
        self.skipped += other.skipped
        self.excluded += other.excluded


def copy_tree(
    src: Path,
    dest: Path,
    *,
    rel_prefix: str = "",
    is_denied: DeniedPredicate = _never_denied,
    skip_names: Iterable[str] = (),
    exclude: Exclusion | None = None,
) -> StagingReport:
    """Copy regular files and directories; skip links, devices, denied and excluded paths.

    `rel_prefix` is the workspace-relative path of `src`, so deny rules are
    matched against the path the agent would see; `exclude` is asked about
    each entry's absolute source path, as written and with links resolved. A
    destination inside the source is never copied into itself.
    """
    copier = _TreeCopier(
        is_denied=is_denied,
        skip=set(skip_names),
        exclude=exclude,
        dest_root=dest.resolve(),
        src_written=Path(os.path.abspath(src)),
        src_real=Path(os.path.realpath(src)),
    )
    report = copier.report
    if src.is_symlink():
        report.skipped.append(SkippedEntry(rel_prefix or src.name, "symlink"))
    elif exclude is not None and copier.excluded("", src.stat(follow_symlinks=False)):
        report.skipped.append(SkippedEntry(rel_prefix or src.name, "answer_key"))
    elif src.is_file():
        if is_denied(rel_prefix):
            report.skipped.append(SkippedEntry(rel_prefix, "denied"))
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            copier.copy_file(str(src), dest)
    else:
        copier.walk(src, dest, rel_prefix, "")
    return report


@dataclass
class _TreeCopier:
    """One `copy_tree` call: what it must leave out, and the report it fills in."""

    is_denied: DeniedPredicate
    skip: set[str]
    exclude: Exclusion | None
    dest_root: Path
    src_written: Path  # the source as written (absolute) ...
    src_real: Path  # ... and with links resolved: `exclude` is asked about both
    report: StagingReport = field(default_factory=StagingReport)

    def excluded(self, rel_to_src: str, st: os.stat_result | None) -> bool:
        if self.exclude is None:
            return False
        if rel_to_src:
            written, real = self.src_written / rel_to_src, self.src_real / rel_to_src
        else:
            written, real = self.src_written, self.src_real
        if self.exclude.covers(written, st) or self.exclude.covers(real, st):
            self.report.excluded.append(written)
            return True
        return False

    def copy_file(self, source: str, target: Path) -> None:
        shutil.copy2(source, target, follow_symlinks=False)
        self.report.files += 1
        self.report.bytes += target.stat().st_size

    def walk(self, directory: Path, target: Path, prefix: str, from_src: str) -> None:
        """Copy `directory` (at `prefix` in the workspace, `from_src` below the source) into `target`."""
        target.mkdir(parents=True, exist_ok=True)
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if entry.name in self.skip or Path(entry.path).resolve() == self.dest_root:
                continue
            rel = f"{prefix}/{entry.name}" if prefix else entry.name
            rel_to_src = f"{from_src}/{entry.name}" if from_src else entry.name
            self._entry(entry, target, rel, rel_to_src)

    def _entry(self, entry: os.DirEntry[str], target: Path, rel: str, rel_to_src: str) -> None:
        st = entry.stat(follow_symlinks=False)
        mode = st.st_mode
        if self.is_denied(rel) or (stat.S_ISDIR(mode) and self.is_denied(rel + "/")):
            self.report.skipped.append(SkippedEntry(rel, "denied"))
        elif stat.S_ISLNK(mode):
            self.report.skipped.append(SkippedEntry(rel, "symlink"))
        elif self.excluded(rel_to_src, st):
            self.report.skipped.append(SkippedEntry(rel, "answer_key"))
        elif stat.S_ISDIR(mode):
            self.walk(Path(entry.path), target / entry.name, rel, rel_to_src)
        elif stat.S_ISREG(mode):
            self.copy_file(entry.path, target / entry.name)
        else:
            self.report.skipped.append(SkippedEntry(rel, special_file_kind(mode)))


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def stage_case_workspace(
    config: EvalConfig,
    case: Case,
    dest: Path,
    *,
    is_denied: DeniedPredicate = _never_denied,
) -> StagingReport:
    """The case workspace: input file, whitelisted companion files, output dirs.

    answers.yaml, annotations and every other case file stay on the host:
    they are evaluation material.
    """
    dest.mkdir(parents=True, exist_ok=True)
    report = StagingReport()
    shutil.copyfile(case.input_file, dest / case.input_file.name)
    report.files += 1
    for entry in config.dataset.workspace.files:
        source = workspace_file(case.dir, entry)
        if not source.exists() and not source.is_symlink():
            continue
        if source.is_symlink():
            report.skipped.append(SkippedEntry(entry, "symlink"))
            continue
        if not _inside(source, case.dir):
            report.skipped.append(SkippedEntry(entry, "outside", "not inside the case directory"))
            continue
        report.add(copy_tree(source, dest / entry, rel_prefix=entry, is_denied=is_denied))
    create_output_dirs(config, dest)
    return report


def stage_batch_workspace(
    config: EvalConfig, entries: list[dict[str, Any]], order: list[dict[str, Any]], dest: Path
) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "batch.yaml").write_text(yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=120))
    (dest / "case_order.yaml").write_text(yaml.safe_dump(order, sort_keys=False))
    create_output_dirs(config, dest)


def create_output_dirs(config: EvalConfig, dest: Path) -> None:
    for output in config.outputs:
        if not output.path:
            continue
        target = dest / output.path
        # A path with a suffix names a file (e.g. report.html): create its parent.
        (target.parent if target.suffix else target).mkdir(parents=True, exist_ok=True)


def stage_invocation_workspace(config: EvalConfig, invocation: Invocation, dest: Path, *, repo_copy: Path | None,
                               is_denied: DeniedPredicate) -> None:
    """What one invocation's sandbox starts with: the repo copy (repo mode), the batch files
    (batch mode), or the case's input and workspace files."""
    if repo_copy is not None:
        shutil.copytree(repo_copy, dest, symlinks=True)
        create_output_dirs(config, dest)
        shutil.copyfile(invocation.cases[0].input_file, dest / invocation.cases[0].input_file.name)
    elif config.is_batch:
        stage_batch_workspace(config, list(invocation.batch_entries), list(invocation.case_order), dest)
    else:
        stage_case_workspace(config, invocation.cases[0], dest, is_denied=is_denied)


def stage_repo_workspace(
    project_root: Path,
    dest: Path,
    *,
    exclude: Exclusion,
    is_denied: DeniedPredicate = _never_denied,
    only: set[str] | None = None,
) -> StagingReport:
    """A copy of the project for `runner.workspace_mode: repo`, minus the answer key and `.git`;
    with `only` (the project's files as git has them, relative), nothing else."""
    if only is None:
        return copy_tree(project_root, dest, is_denied=is_denied, skip_names=ALWAYS_SKIPPED, exclude=exclude)
    directories = {"/".join(name.split("/")[:depth]) for name in only for depth in range(1, name.count("/") + 1)}

    def outside_the_checkout(rel: str) -> bool:
        name = rel.rstrip("/")
        return is_denied(rel) or (name not in only and name not in directories)

    return copy_tree(project_root, dest, is_denied=outside_the_checkout, skip_names=ALWAYS_SKIPPED, exclude=exclude)


@dataclass(frozen=True)
class StagedResource:
    host_path: Path
    container_path: str


@dataclass
class StagedResources:
    resources: list[StagedResource]
    report: StagingReport  # report.excluded: what the answer key took out of them


def resource_roots(config: EvalConfig, where: ProjectPaths) -> list[Path]:
    """Every directory or file mounted into the sandbox from the project, whether it exists or not."""
    project_root = where.project_root
    return [
        *(project_root / name for name in PROJECT_RESOURCES),
        *(project_root / ".claude" / name for name in CLAUDE_RESOURCES),
        *(where.plugin_dir(configured) for configured in config.runner.plugin_dirs),
    ]


def stage_project_resources(
    config: EvalConfig,
    where: ProjectPaths,
    dest: Path,
    *,
    is_denied: DeniedPredicate = _never_denied,
    exclude: Exclusion | None = None,
) -> StagedResources:
    """Copies of the project's skills, agents, commands, CLAUDE.md, scripts and
    plugin dirs, to be bind-mounted read-only into every case's /workspace."""
    project_root = where.project_root
    staged: list[StagedResource] = []
    report = StagingReport()
    for name in PROJECT_RESOURCES:
        source = project_root / name
        if source.exists() and not source.is_symlink():
            report.add(copy_tree(source, dest / name, rel_prefix=name, is_denied=is_denied,
                                 skip_names=ALWAYS_SKIPPED, exclude=exclude))
            if (dest / name).exists():
                staged.append(StagedResource(dest / name, f"{paths.WORKSPACE}/{name}"))
    for name in CLAUDE_RESOURCES:
        source = project_root / ".claude" / name
        rel = f".claude/{name}"
        if source.is_dir() and not source.is_symlink():
            report.add(copy_tree(source, dest / ".claude" / name, rel_prefix=rel, is_denied=is_denied,
                                 skip_names=ALWAYS_SKIPPED, exclude=exclude))
            if (dest / ".claude" / name).exists():
                staged.append(StagedResource(dest / ".claude" / name, f"{paths.WORKSPACE}/{rel}"))
    seen: dict[str, Path] = {}
    for configured in config.runner.plugin_dirs:
        plugin = where.plugin_dir(configured)
        if not plugin.is_dir():
            raise ConfigError(f"plugin directory {configured!r} not found ({plugin})", field="runner.plugin_dirs",
                              fix="correct the path (relative to the working directory or to eval.yaml's directory)")
        previous = seen.setdefault(plugin.name, plugin)
        if previous != plugin:
            raise ConfigError(f"two plugin directories share the name {plugin.name!r}: {previous} and {plugin}",
                              field="runner.plugin_dirs", fix="rename one of them")
        target = dest / ".staged-plugins" / plugin.name
        report.add(copy_tree(plugin, target, skip_names=ALWAYS_SKIPPED, exclude=exclude))
        if target.exists():
            staged.append(StagedResource(target, f"{paths.WORKSPACE}/.staged-plugins/{plugin.name}"))
    return StagedResources(staged, report)
