"""Where each path-valued field of eval.yaml points: one function per rule.

The reference resolves its fields against two bases: the directory holding
eval.yaml (`dataset.path`, `inputs.tools[].prompt_file`, generation seeds'
`prompt_file`) and its *project root*, which is the working directory it runs
in (judges' `prompt_file`/`context`/`agent.context`, `module`, `runner.plugin_dirs`,
hooks). Its users run from the repository root, so an `eval/eval.yaml` names
`eval/prompts/judge.md`. This project's project root — what the sandbox mounts
and where host hooks and judge code run — is eval.yaml's directory; the two
agree when you run from there. For the fields the reference resolves from its
working directory we look there first — when eval.yaml is inside it — and then
in eval.yaml's directory, so both layouts load (docs/validation.md has the table).

Everything that needs one of these answers — the judges, tool interception,
staging and the answer key (which must leave every such file out of the
sandbox) — asks here, so they cannot disagree.

The containment checks (`relative_problem`, `skill_name_problem`, ...) are pure
and used by the config models at load time; the resolvers only join paths,
except where the rule itself depends on what exists (`project_file`).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from agent_eval_sandbox.errors import ConfigError

_SEPARATORS = re.compile(r"[\\/]+")


# --- containment rules (pure, on the text as written) ------------------------------------


def has_parent_segment(path: str) -> bool:
    """Whether any segment is `..` (either separator)."""
    return ".." in _SEPARATORS.split(path)


def is_absolute(path: str) -> bool:
    """Absolute on this host, `~`-relative, or a Windows drive/UNC path (never meant as relative)."""
    return path.startswith(("/", "\\", "~")) or bool(re.match(r"^[A-Za-z]:[\\/]", path))


def escapes(path: str) -> bool:
    """A relative path whose `..` segments climb above the directory it is relative to."""
    normal = posixpath.normpath(path.replace("\\", "/"))
    return normal == ".." or normal.startswith("../")


def relative_problem(path: str, *, allow_absolute: bool = False, no_parent: bool = False,
                     reject_root: bool = False) -> str | None:
    """Why `path` breaks the containment rule of its field, or None.

    The default rule: relative, and no `..` that escapes the base. `no_parent`
    rejects any `..` segment (the reference's rule for dataset and output
    paths); `allow_absolute` lets an absolute path through as written;
    `reject_root` refuses the base itself (`.`).
    """
    if not path.strip():
        return "must not be empty"
    if "\x00" in path:
        return "must not contain a NUL character"
    if is_absolute(path):
        if allow_absolute and not path.startswith("~"):
            return None
        return "must be a relative path (absolute paths are refused)"
    if no_parent and has_parent_segment(path):
        return "must not contain '..'"
    if escapes(path):
        return "must not climb out of its directory with '..'"
    if reject_root and posixpath.normpath(path.replace("\\", "/")) == ".":
        return "must name a subdirectory or file, not the directory itself ('.')"
    return None


def normal_relative(path: str) -> str:
    """A checked relative path in one spelling: `./a//b/` → `a/b`."""
    return posixpath.normpath(path.replace("\\", "/"))


_SKILL_FORBIDDEN = re.compile(r"[\s\\\x00-\x1f\x7f]")


def skill_name_problem(skill: str) -> str | None:
    """Why a skill name could not be a skill of the project (`/name` in Claude Code), or None.

    A skill name becomes a path under `.claude/skills/` (and a plugin's skills):
    it must stay inside, so no absolute form and no `..`. `plugin:skill` and
    `dir/skill` are names; a leading `/` is the slash command, not part of the name.
    """
    if skill.startswith("/"):
        return "is a skill name, written without the leading '/' (e.g. my-skill)"
    if _SKILL_FORBIDDEN.search(skill):
        return "must be a skill name without spaces, backslashes or control characters"
    if has_parent_segment(skill) or is_absolute(skill):
        return "must be a skill name inside the project (no '..', not a path)"
    return None


def module_name_problem(module: str) -> str | None:
    """Why `module:` is not an importable dotted module name of the project, or None."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return "must be a dotted Python module name such as eval.judges.quality (no paths, no relative imports)"
    return None


# --- resolution ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectPaths:
    """The bases eval.yaml's paths resolve against.

    `config_dir`: the directory holding eval.yaml. It is also this project's
    project root (mounted resources, hooks' and judge code's working directory).
    `workdir`: the working directory the eval was loaded from — the reference's
    project root.
    """

    config_dir: Path
    workdir: Path

    @property
    def project_root(self) -> Path:
        return self.config_dir

    def _bases(self) -> tuple[Path, ...]:
        """The reference's project root first, then this project's.

        The working directory counts only when eval.yaml is inside it — the
        reference's user at their repository root. Anywhere else it is not the
        project's: run from inside a run directory (the agent's files) it must
        not supply a judge's prompt or a plugin.
        """
        work, config = Path(os.path.realpath(self.workdir)), Path(os.path.realpath(self.config_dir))
        if work != config and work in config.parents:
            return (self.workdir, self.config_dir)
        return (self.config_dir,)

    def project_file(self, configured: str) -> Path:
        """A path the reference resolves from its project root (the working directory):
        judges' `prompt_file`, `context` and `agent.context`.

        Absolute: as written. Relative: under the working directory if it exists
        there, else under eval.yaml's directory (where it is also looked for when
        it exists nowhere, so a "not found" names the project's own path).
        """
        path = Path(configured)
        if path.is_absolute():
            return path
        for base in self._bases():
            if (base / path).exists():
                return base / path
        return self.config_dir / path

    def project_file_candidates(self, configured: str) -> list[Path]:
        """Every place `project_file` may pick: the answer key leaves out all of them."""
        path = Path(configured)
        return [path] if path.is_absolute() else [base / path for base in self._bases()]

    def module_roots(self) -> tuple[Path, ...]:
        """Where a judge `module:` may come from (judge code runs with eval.yaml's directory
        first on sys.path; the reference imports from its working directory)."""
        return (self.config_dir, *(base for base in self._bases() if base != self.config_dir))

    def dataset_dir(self, configured: str) -> Path:
        """`dataset.path`: relative to eval.yaml's directory, or absolute; unset is eval.yaml's directory."""
        path = Path(configured or ".")
        return path if path.is_absolute() else self.config_dir / path

    def plugin_dir(self, configured: str) -> Path:
        """A `runner.plugin_dirs` entry: absolute, or relative to the project root (the working
        directory if it exists there, else eval.yaml's directory).

        A lexically external path (absolute, or `../x`) is an explicit opt-in, as
        in the reference; a path written inside the project must not leave it
        through a symlink (ConfigError).
        """
        path = Path(configured)
        if path.is_absolute():
            return Path(os.path.realpath(path))
        base = next((b for b in self._bases() if (b / path).exists()), self.config_dir)
        written = Path(os.path.normpath(base / path))
        real = Path(os.path.realpath(written))
        base_real = Path(os.path.realpath(base))
        inside = written == base or base in written.parents
        if inside and real != base_real and base_real not in real.parents:
            raise ConfigError(
                f"plugin directory {configured!r} is inside the project but a symlink takes it to {real}",
                field="runner.plugin_dirs",
                fix="name the real directory (an absolute path is an explicit opt-in)",
            )
        return real

    def tool_prompt_file(self, configured: str) -> Path:
        """An `inputs.tools[].prompt_file`: relative to eval.yaml's directory."""
        return tool_prompt_file(self.config_dir, configured)

    def seed_prompt_file(self, configured: str) -> Path:
        """A `generation.seeds[].prompt_file`: relative to eval.yaml's directory."""
        return self.config_dir / configured


def tool_prompt_file(base_dir: Path, configured: str) -> Path:
    """A tool handler's `prompt_file`: relative to the file that names it (eval.yaml, or
    tool_handlers.yaml); a handlers file written by hand may also give an absolute path."""
    path = Path(configured)
    return path if path.is_absolute() else base_dir / path


def workspace_file(case_dir: Path, entry: str) -> Path:
    """A `dataset.workspace.files` entry: relative to the case directory (checked at load)."""
    return case_dir / normal_relative(entry)
