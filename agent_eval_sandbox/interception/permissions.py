"""`permissions.allow` / `permissions.deny` as Claude Code rules, exactly as the reference compiles them.

- Simple entries (strings) pass through as they are.
- A path rule `{path, tools}` becomes one `Tool(pattern)` per path-scoped tool
  (Read, Edit, Write, Grep, Glob); a directory (`dir/`) becomes `dir/**` so it
  matches recursively; other tools are dropped.
- For deny lists (`harden_bash`), a path rule naming Bash also denies Read and
  Edit of the path: a Bash rule matches the command, never a path.
- Results are deduplicated in order.

Where they go follows the reference runner: with only simple entries, the
lists become `--allowed-tools` / `--disallowed-tools`; with any path rule,
both lists are compiled into settings. This project additionally puts the
compiled rules into the read-only managed settings in both cases, so the
agent cannot edit them away.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent_eval_sandbox.config.models import (
    PathRule,
    PermissionEntry,
    PermissionsConfig,
)

PATH_SCOPED_TOOLS = ("Read", "Edit", "Write", "Grep", "Glob")


def path_pattern(path: str) -> str:
    """A directory (trailing `/`) matches recursively; a file is verbatim."""
    return f"{path}**" if path.endswith("/") else path


def compile_permission_rules(rules: Iterable[PermissionEntry], *, harden_bash: bool = False) -> list[str]:
    out: list[str] = []

    def add(pattern: str) -> None:
        if pattern not in out:
            out.append(pattern)

    for rule in rules:
        if isinstance(rule, PathRule):
            emitted = [t for t in rule.tools if t in PATH_SCOPED_TOOLS]
            if harden_bash and "Bash" in rule.tools:
                emitted += [t for t in ("Read", "Edit") if t not in emitted]
            for tool in emitted:
                add(f"{tool}({path_pattern(rule.path)})")
        else:
            add(rule)
    return out


@dataclass(frozen=True)
class CompiledPermissions:
    allow: tuple[str, ...]
    deny: tuple[str, ...]
    # Simple-only configs go to the CLI as flags, verbatim (the reference's first branch).
    flag_allow: tuple[str, ...]
    flag_deny: tuple[str, ...]

    def cli_flags(self) -> list[str]:
        flags: list[str] = []
        if self.flag_deny:
            flags += ["--disallowed-tools", ",".join(self.flag_deny)]
        if self.flag_allow:
            flags += ["--allowed-tools", ",".join(self.flag_allow)]
        return flags

    def settings_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {}
        if self.allow:
            block["allow"] = list(self.allow)
        if self.deny:
            block["deny"] = list(self.deny)
        return block


def compile_permissions(permissions: PermissionsConfig) -> CompiledPermissions:
    allow = tuple(compile_permission_rules(permissions.allow))
    deny = tuple(compile_permission_rules(permissions.deny, harden_bash=True))
    if permissions.has_path_rules:
        return CompiledPermissions(allow=allow, deny=deny, flag_allow=(), flag_deny=())
    simple_allow = tuple(e for e in permissions.allow if isinstance(e, str))
    simple_deny = tuple(e for e in permissions.deny if isinstance(e, str))
    return CompiledPermissions(allow=allow, deny=deny, flag_allow=simple_allow, flag_deny=simple_deny)
