"""The answer key: every file of the project that judges, hooks and interception use.

None of it may reach a sandbox — not through the read-only resource mounts
(`CLAUDE.md`, `scripts/`, `skills/`, `.context/`, `.claude/{skills,agents,commands}`,
plugin dirs), nor through a `workspace_mode: repo` copy. `answer_key` turns
eval.yaml's fields into absolute paths with the same functions the judges and
interception read them with (`config/paths.py`); where a field may resolve to
more than one place (a judge's prompt_file: the working directory, else
eval.yaml's directory), every candidate is in the key. Staging only compares
against the result.

What it holds:
- eval.yaml, the dataset directory, the runs directory;
- `tool_handlers.yaml`, and files named like an offline script
  (`model_script.yaml`, `hook_script.yaml`, `judge_script.yaml`, `pairwise_script.yaml`,
  the agent judges' `judge_scripts/`) wherever they are;
- judges: `prompt_file`, `context` (and an agent judge's `agent.context`);
  a `module:` — its file, the `__init__.py` of its packages, every project
  module it imports statically (`python_imports`), and its package directory
  as a whole unless that directory is the project root or is, or holds, a
  resource directory (a module `scripts.grade` takes `scripts/grade.py` and
  its imports, not all of `scripts/`);
- interception: every handler's `prompt_file` (`inputs.tools`, `tool_handlers.yaml`);
- host-scope hooks: each word of a `command` or `condition` that names a file
  of the project (relative to the project root, or through
  `$AGENT_EVAL_PROJECT_ROOT`) — unless a container-scope hook names it too
  (relative to /workspace), since that hook runs inside the sandbox.

A hard link to an answer-key file is left out too; a *copy* of one under
another name is not recognisable and is the project's own business.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent_eval_sandbox.config import scripts
from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config
from agent_eval_sandbox.config.models import (
    HOOK_PHASES,
    EvalConfig,
    HookEntry,
    JudgeConfig,
)
from agent_eval_sandbox.config.paths import ProjectPaths, tool_prompt_file
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.interception import HANDLERS_FILE_NAME, ToolHandlers
from agent_eval_sandbox.runner.python_imports import is_file, project_files_of
from agent_eval_sandbox.runner.workspace import resource_roots

# Left out wherever they are: they script the model, the hook model and the judges.
OFFLINE_SCRIPT_NAMES = scripts.ALL | {HANDLERS_FILE_NAME}
_PROJECT_VARS = ("AGENT_EVAL_PROJECT_ROOT",)
_SANDBOX_WORKSPACE_VARS = ("CASE_WORKSPACE", "AGENT_EVAL_WORKSPACE")


def _forms(path: Path) -> set[Path]:
    """The path as written (made absolute) and with links resolved: staging sees either."""
    return {Path(os.path.abspath(path)), Path(os.path.realpath(path))}


@dataclass(frozen=True)
class AnswerKey:
    paths: frozenset[Path]  # absolute; a directory stands for everything in it
    names: frozenset[str] = OFFLINE_SCRIPT_NAMES
    inodes: frozenset[tuple[int, int]] = frozenset()  # (st_dev, st_ino) of the key's regular files
    quiet: frozenset[Path] = frozenset()  # always left out and documented as such: not worth a warning

    @classmethod
    def of(cls, paths: Iterable[Path], *, quiet: Iterable[Path] = ()) -> AnswerKey:
        forms = {form for path in paths for form in _forms(path)}
        inodes = set()
        for path in forms:
            try:
                st = path.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                inodes.add((st.st_dev, st.st_ino))
        return cls(frozenset(forms), inodes=frozenset(inodes),
                   quiet=frozenset(form for path in quiet for form in _forms(path)))

    def covers(self, path: Path, st: os.stat_result | None = None) -> bool:
        """Whether `path` (absolute) is part of the key; `st` (not following links) adds the hard-link check."""
        named = path.name in self.names or scripts.is_script_name(path.name)
        if named or path in self.paths or any(p in self.paths for p in path.parents):
            return True
        return st is not None and stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in self.inodes

    def is_quiet(self, path: Path) -> bool:
        return path in self.quiet or any(p in self.quiet for p in path.parents)


def answer_key(loaded: LoadedConfig, *, runs_base: Path, handlers: ToolHandlers | None = None) -> AnswerKey:
    """The answer key of the eval `loaded`; `handlers` are the compiled `inputs.tools`, if any."""
    config, where, root = loaded.config, loaded.paths, loaded.root
    resources = resource_roots(config, where)
    always = [loaded.path, loaded.dataset_dir, runs_base]
    found: list[Path] = [*always, root / HANDLERS_FILE_NAME, root / scripts.JUDGE_SCRIPT, root / scripts.HOOK_SCRIPT,
                          root / scripts.PAIRWISE_SCRIPT]
    for judge in config.judges:
        found += judge_files(judge, where, resources)
    found += [where.tool_prompt_file(tool.prompt_file) for tool in config.inputs.tools if tool.prompt_file]
    if handlers is not None:  # compiled into, or read from, tool_handlers.yaml beside eval.yaml
        found += [tool_prompt_file(root, h.prompt_file) for h in handlers.handlers if h.prompt_file]
    found += host_hook_files(config, root, resources)
    neighbours = neighbouring_keys(root, loaded.path)
    return AnswerKey.of([*found, *neighbours], quiet=[*always, *neighbours])


def left_out_line(key: AnswerKey, excluded: Iterable[Path], project_root: Path) -> str:
    """One line naming the answer-key files staging took out (eval.yaml, the dataset and the
    runs dir go without saying), so that a skill that needed one of them shows why; "" if none."""
    shown = set()
    for path in excluded:
        if key.is_quiet(path):
            continue
        try:
            shown.add(path.relative_to(project_root).as_posix())
        except ValueError:
            shown.add(str(path))
    if not shown:
        return ""
    return ("left out of the sandbox, as judges, hooks or tool interception use them (answer key): "
            + ", ".join(sorted(shown)))


def judge_files(judge: JudgeConfig, where: ProjectPaths, resources: Iterable[Path]) -> list[Path]:
    """What a judge reads or runs from the project: every place each of its paths may resolve to."""
    names = [judge.prompt_file, *judge.context, *(judge.agent.context if judge.agent else [])]
    found = [path for name in names if name for path in where.project_file_candidates(name)]
    if judge.module:
        for root in where.module_roots():
            found += module_files(judge.module, root, resources)
    return found


def module_files(module: str, root: Path, resources: Iterable[Path]) -> list[Path]:
    """A judge module's files: see the module doc for the package-directory rule."""
    parts = module.split(".")
    base = root.joinpath(*parts)
    # Named even when absent: an installed module of that name is not the project's, and costs nothing.
    found = [base.with_name(base.name + ".py"), *project_files_of(root, module)]
    shared = [Path(os.path.realpath(r)) for r in resources]
    # The module itself when it is a package, and the package it is in: whole, unless shared.
    for directory in (base, *([root.joinpath(*parts[:-1])] if len(parts) > 1 else [])):
        real = Path(os.path.realpath(directory))
        if not any(r == real or real in r.parents for r in shared):
            found.append(directory)
    return found


def host_hook_files(config: EvalConfig, root: Path, resources: Iterable[Path] = ()) -> list[Path]:
    """Project files named by host-scope hooks (paths, and modules run with `python -m`), less
    those a container-scope hook needs."""
    host: set[Path] = set()
    inside: set[Path] = set()
    for phase in HOOK_PHASES:
        for hook in getattr(config.hooks, phase):
            found = _hook_files(hook, root)
            if hook.scope != "container":
                found |= {path for module in _hook_modules(hook) for path in module_files(module, root, resources)
                          if path.exists()}
            (inside if hook.scope == "container" else host).update(found)
    needed_inside = {form for path in inside for form in _forms(path)}
    return sorted(path for path in host if not _forms(path) & needed_inside)


def _hook_files(hook: HookEntry, root: Path) -> set[Path]:
    container = hook.scope == "container"
    found: set[Path] = set()
    for command in (hook.command, hook.condition):
        for word in command_words(command):
            for piece in {word, word.partition("=")[2]}:  # VAR=path, --option=path
                path = _word_path(piece, root, container=container)
                if path is not None and is_file(path):
                    found.add(path)
    return found


def _hook_modules(hook: HookEntry) -> set[str]:
    """Modules a hook runs as `python -m package.module`."""
    modules: set[str] = set()
    for command in (hook.command, hook.condition):
        words = command_words(command)
        for flag, word in zip(words, words[1:], strict=False):
            if flag == "-m" and all(part.isidentifier() for part in word.split(".")):
                modules.add(word)
    return modules


# Other evals in the project, and runs of any eval, are answer key too: a skill under test
# must not read another eval's judges and cases, nor the recorded runs (inputs, outputs,
# verdicts) of this one.
_EVAL_CONFIG_KEYS = ("judges", "dataset")
_MAX_SCANNED_YAML = 5000


def neighbouring_keys(root: Path, own_config: Path) -> list[Path]:
    """The eval configs of the project besides `own_config` with their datasets and judge
    files, and every run directory this tool wrote under it."""
    found: list[Path] = []
    scanned = 0
    for current, dirs, files in os.walk(root):
        here = Path(current)
        if _is_run_directory(here):
            found.append(here)
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if d not in _SCAN_SKIPPED]
        for name in files:
            if not name.endswith((".yaml", ".yml")) or scanned >= _MAX_SCANNED_YAML:
                continue
            scanned += 1
            path = here / name
            if os.path.realpath(path) != os.path.realpath(own_config):
                found += _eval_config_files(path)
    return found


_SCAN_SKIPPED = {".git", "node_modules", "__pycache__", ".venv", ".tox", ".mypy_cache", ".pytest_cache"}


def _is_run_directory(directory: Path) -> bool:
    marker = directory / "run.json"
    if not marker.is_file() or marker.is_symlink():
        return False
    try:
        with open(marker, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return b'"agent-eval-sandbox"' in head


def _eval_config_files(path: Path) -> list[Path]:
    """If `path` is an eval config: it, its dataset and its judges' and hooks' files."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return []
    text = head.decode("utf-8", "replace")
    if not any(line.startswith(f"{key}:") for line in text.splitlines() for key in _EVAL_CONFIG_KEYS):
        return []
    try:
        other = load_eval_config(path)
    except UserError:
        return [path]  # not loadable: at least the file itself (it may hold checks and answers)
    config, where = other.config, other.paths
    resources = resource_roots(config, where)
    found = [path, other.dataset_dir] if config.dataset.path else [path]
    for judge in config.judges:
        found += judge_files(judge, where, resources)
    found += host_hook_files(config, other.root, resources)
    return found


def command_words(command: str) -> list[str]:
    """The words of a shell command, quotes removed, operators (`;`, `|`, `>`, ...) split off."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # an unbalanced quote: the plain words still name the files
        return command.split()


def _word_path(word: str, root: Path, *, container: bool) -> Path | None:
    """The project path a word of a hook command names, if it names one we can tell."""
    variables = _SANDBOX_WORKSPACE_VARS if container else _PROJECT_VARS
    for variable in variables:
        for form in (f"${{{variable}}}", f"${variable}"):
            if word == form or word.startswith(form + "/"):
                word = "." + word[len(form):]
    if container and (word == paths.WORKSPACE or word.startswith(paths.WORKSPACE + "/")):
        word = "." + word[len(paths.WORKSPACE):]
    if not word or any(ch in word for ch in "$`*?[") or word.startswith("~"):
        return None
    path = Path(word)
    if container and path.is_absolute():
        return None  # a path of the sandbox's own, not of the project
    return Path(os.path.normpath(path if path.is_absolute() else root / path))
