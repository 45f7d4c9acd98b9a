"""Which slash commands the Claude Code CLI in the sandbox will resolve, and whether a skill is one of them.

`execution.skill: NAME` sends `/NAME args` to `claude -p`. A name the CLI does
not know is not an error there: the text goes to the model as is, and the case
runs (and is judged) without the skill. So the names are checked before a run,
the way the CLI resolves them. Measured on Claude Code 2.1.332 in the sandbox
image (the `slash_commands` of its stream-json `init` event, and which `/name`
prompts it expanded):

- `.claude/skills/<dir>/SKILL.md` is `/<dir>`; the frontmatter `name:` resolves
  too. Deeper directories are not skills.
- `.claude/commands/<file>.md` is `/<file>`; `commands/<sub>/<file>.md` is
  `/<sub>:<file>` only.
- a `--plugin-dir` (each `runner.plugin_dirs` entry) named by its
  `.claude-plugin/plugin.json` `name` (else its directory): `skills/<dir>/SKILL.md`
  is `/<plugin>:<dir>`, and its frontmatter `name:` resolves both as
  `/<plugin>:<name>` and bare `/<name>`; `commands/<file>.md` is `/<plugin>:<file>` only.
- the project's `skills/` directory (mounted at /workspace/skills) is NOT a
  skill location: `/name` of a skill there goes to the model as plain text.
- the CLI's own commands and bundled skills (`claude_cli.BUILTIN_COMMANDS`).

Where the CLI's behaviour is not measured (a plugin's nested commands, a
manifest's own `skills`/`commands` paths), a name is accepted rather than
refused: a missed typo costs a run, a false refusal blocks a working eval.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent_eval_sandbox.app.claude_cli import BUILTIN_COMMANDS, MEASURED_VERSION
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION

# Only the head of a SKILL.md is read for its frontmatter.
_FRONTMATTER_BYTES = 64 * 1024
_SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Command:
    name: str  # as typed after the slash
    origin: str  # where it comes from, for messages


def frontmatter_name(skill_md: Path) -> str | None:
    """The `name:` of a SKILL.md's YAML frontmatter, if it has one."""
    try:
        with open(skill_md, "rb") as handle:
            head = handle.read(_FRONTMATTER_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = head.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        return None
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name.strip() if isinstance(name, str) and name.strip() else None


def _copied(path: Path, root: Path) -> bool:
    """Whether staging copies `path` (under `root`) into the sandbox: it never copies a symbolic link."""
    return not any(part.is_symlink() for part in (path, *path.parents) if part == root or root in part.parents)


def _skill_dirs(directory: Path) -> Iterator[Path]:
    if directory.is_dir():
        yield from sorted(p for p in directory.iterdir()
                          if (p / _SKILL_FILE).is_file() and _copied(p / _SKILL_FILE, directory))


def _command_files(directory: Path) -> Iterator[tuple[str, Path]]:
    """`(name, file)` of each command: nested directories join with ':'."""
    if directory.is_dir():
        for path in sorted(directory.rglob("*.md")):
            if path.is_file() and _copied(path, directory):
                yield ":".join(path.relative_to(directory).with_suffix("").parts), path


def project_commands(project_root: Path) -> list[Command]:
    """The project's `.claude/skills` and `.claude/commands`."""
    commands: list[Command] = []
    claude = project_root / ".claude"
    for skill in _skill_dirs(claude / "skills"):
        origin = f".claude/skills/{skill.name}/{_SKILL_FILE}"
        commands.append(Command(skill.name, origin))
        named = frontmatter_name(skill / _SKILL_FILE)
        if named and named != skill.name:
            commands.append(Command(named, origin))
    commands += [Command(name, f".claude/commands/{path.relative_to(claude / 'commands')}")
                 for name, path in _command_files(claude / "commands")]
    return commands


def _manifest(plugin: Path) -> dict[str, Any]:
    try:
        data = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _manifest_paths(plugin: Path, value: Any) -> list[Path]:
    entries = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [plugin / entry for entry in entries if isinstance(entry, str)]


def plugin_commands(plugin: Path) -> list[Command]:
    """A plugin directory's skills and commands, named as the CLI names them."""
    manifest = _manifest(plugin)
    declared = manifest.get("name")
    prefix = declared if isinstance(declared, str) and declared else plugin.name
    origin = f"plugin {prefix} ({plugin})"
    commands: list[Command] = []
    skill_roots = [plugin / "skills", *_manifest_paths(plugin, manifest.get("skills"))]
    for root in skill_roots:
        # A manifest may name a skill directory itself, or a directory of them.
        skills = [root] if (root / _SKILL_FILE).is_file() else list(_skill_dirs(root))
        for skill in skills:
            commands.append(Command(f"{prefix}:{skill.name}", origin))
            named = frontmatter_name(skill / _SKILL_FILE)
            if named:
                commands += [Command(f"{prefix}:{named}", origin), Command(named, origin)]
    for root in [plugin / "commands", *_manifest_paths(plugin, manifest.get("commands"))]:
        if root.is_file() and root.suffix == ".md":
            commands.append(Command(f"{prefix}:{root.stem}", origin))
        commands += [Command(f"{prefix}:{name}", origin) for name, _ in _command_files(root)]
    return commands


@dataclass(frozen=True)
class CommandCatalog:
    """Every slash command a case's CLI will resolve (but the built-ins, which are counted)."""

    commands: tuple[Command, ...]
    claude_version: str

    def find(self, name: str) -> Command | None:
        found = next((c for c in self.commands if c.name == name), None)
        if found is None and name in BUILTIN_COMMANDS:
            return Command(name, f"built into Claude Code {MEASURED_VERSION}")
        return found

    @property
    def own_names(self) -> list[str]:
        """The project's and plugins' names, each once, in the order found."""
        return list(dict.fromkeys(c.name for c in self.commands))


def command_catalog(config: EvalConfig, paths: ProjectPaths, *, claude_version: str | None = None) -> CommandCatalog:
    commands = project_commands(paths.project_root)
    for configured in config.runner.plugin_dirs:
        try:
            plugin = paths.plugin_dir(configured)
        except ConfigError:
            continue  # a plugin dir that escapes through a symlink is the run's own error, with its fix
        if plugin.is_dir():  # a missing plugin dir is the run's own error, with its fix
            commands += plugin_commands(plugin)
    version = claude_version or config.sandbox.claude_version or DEFAULT_CLAUDE_VERSION
    return CommandCatalog(tuple(commands), version)


def named_skills(config: EvalConfig) -> list[tuple[str, str]]:
    """`(field, skill)` for every skill the config runs."""
    named = [("execution.skill", config.execution.skill)] if config.execution.skill else []
    for index, step in enumerate(config.execution.steps):
        if step.skill:
            named.append((f"execution.steps[{index}].skill", step.skill))
    return named


def _found_list(catalog: CommandCatalog) -> str:
    names = catalog.own_names
    shown = ", ".join(names[:12]) + (f", … (+{len(names) - 12})" if len(names) > 12 else "")
    own = f"found {shown} and" if names else "found no skill or command of the project or its plugins, only"
    return f"{own} {len(BUILTIN_COMMANDS)} built-in commands"


def _fix(skill: str, field: str, project_root: Path, home: Path | None) -> str:
    """How to make `/skill` resolve, from where a user may have it instead."""
    own = project_root / ".claude" / "skills" / skill
    if (own / _SKILL_FILE).is_file():  # there, but not copied
        return (f".claude/skills/{skill} is (or passes through) a symbolic link, which is never copied into the "
                "sandbox: put a copy of the skill there instead")
    if (project_root / "skills" / skill / _SKILL_FILE).is_file():
        return (f"skills/{skill}/{_SKILL_FILE} exists, but Claude Code does not load skills from skills/: "
                f"move it to .claude/skills/{skill}/, or make its directory a plugin in runner.plugin_dirs")
    if home is not None and any(p.is_file() for p in (home / ".claude" / "skills" / skill / _SKILL_FILE,
                                                      home / ".claude" / "commands" / f"{skill}.md")):
        return (f"it is in your ~/.claude, but the sandbox has a home of its own: copy it into "
                f"{project_root / '.claude'}/")
    return f"create .claude/skills/{skill}/{_SKILL_FILE}, add the plugin that has it to runner.plugin_dirs, " \
           f"or correct {field}"


def check_skill(catalog: CommandCatalog, skill: str, *, field: str, project_root: Path,
                config_path: Path, home: Path | None = None) -> tuple[Command | None, str | None]:
    """The command `skill` resolves to; else a ConfigError, or a warning when only an unknown
    built-in (of another Claude Code version) could still resolve it. `home`: the user's home
    directory, whose ~/.claude the sandbox does not have (named in the fix when the skill is there)."""
    found = catalog.find(skill)
    if found is not None:
        return found, None
    bare = skill.lstrip("/")
    if bare != skill and catalog.find(bare) is not None:
        raise ConfigError(f"{skill!r} starts with '/': the runner adds the slash itself", file=config_path,
                          field=field, fix=f"write {field}: {bare}")
    candidates = catalog.own_names + sorted(BUILTIN_COMMANDS)
    close = difflib.get_close_matches(skill, candidates, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    fix = _fix(skill, field, project_root, home)
    problem = f"no skill or command '/{skill}' in the sandbox{hint}; {_found_list(catalog)}"
    if catalog.claude_version != MEASURED_VERSION:
        # Built-ins change between versions: a name that may be one of another version's is not refused.
        return None, (f"{config_path}: {field}: {problem} (of Claude Code {MEASURED_VERSION}; "
                      f"the sandbox runs {catalog.claude_version}) — {fix}")
    raise ConfigError(problem, file=config_path, field=field, fix=fix)
