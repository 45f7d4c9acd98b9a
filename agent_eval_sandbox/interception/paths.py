"""The OS-level half of deny rules: workspace paths that never enter the container.

Claude Code's permission rules stop its own file tools, not `python3 -c
open(...)`, `awk` or a symlink. So every denied path is also left out of the
container altogether: the workspace builder asks `PathDenyFilter(rel)` for
each workspace-relative path it would copy and skips what it denies.

Denied paths come from:
- every path rule in `permissions.deny` (`{path: eval/, tools: [...]}`, whatever the tools),
- `sandbox.filesystem.denyRead`,
- simple `permissions.deny` rules that deny reading a path: `Read(...)`, `Grep(...)`, `Glob(...)`.

Patterns read like .gitignore lines: a trailing `/` matches a directory and
everything under it; a pattern with no other `/` (`answers.yaml`, `secrets/`)
matches at any depth; a leading `/` (or `./`), or a `/` inside, anchors it to
the workspace root; `*` and `?` stay within one path segment, `**` spans
segments, `[...]` is a character class. Whatever sits under a denied
directory is denied too. Negation (`!pattern`) is refused: denying less than
written must never happen silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from agent_eval_sandbox.config.models import EvalConfig, PathRule
from agent_eval_sandbox.errors import ConfigError

_READ_RULE = re.compile(r"^(?:Read|Grep|Glob)\((.+)\)$")


@dataclass(frozen=True)
class DenyPattern:
    text: str
    field: str
    regex: re.Pattern[str]
    dir_only: bool

    def matches(self, path: str, is_dir: bool) -> bool:
        return (is_dir or not self.dir_only) and self.regex.fullmatch(path) is not None


def _class(pattern: str, start: int) -> tuple[str, int] | None:
    """A `[...]` character class starting at `start`: (regex, index after it), or None if unclosed."""
    end = start + 1
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    end = pattern.find("]", end)
    if end < 0:
        return None
    body = pattern[start + 1 : end]
    negate = body[:1] in ("!", "^")
    members = "".join(c if c == "-" else re.escape(c) for c in body[negate:] if c != "/")
    # A class never matches the separator, negated or not.
    if negate:
        return f"[^/{members}]", end + 1
    return (f"[{members}]" if members else "(?!)"), end + 1


def glob_regex(pattern: str) -> str:
    """The regex body of a gitignore-style glob (no anchoring)."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**", index):
            index += 2
            if index < len(pattern) and pattern[index] == "/":
                out.append("(?:.*/)?")
                index += 1
            else:
                out.append(".*")
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (klass := _class(pattern, index)) is not None:
            out.append(klass[0])
            index = klass[1]
            continue
        elif char == "\\" and index + 1 < len(pattern):
            index += 1
            out.append(re.escape(pattern[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def compile_deny_pattern(text: str, field: str) -> DenyPattern | None:
    """A deny pattern; None for one that names nothing inside the workspace (`//abs`, `~/x`)."""
    pattern = text.strip()
    if pattern.startswith("!"):
        raise ConfigError(
            f"deny path {text!r} is a negation, which is not supported", field=field,
            fix="list only the paths to deny",
        )
    if pattern.startswith(("//", "~")):
        return None
    anchored = pattern.startswith(("/", "./"))
    pattern = pattern.removeprefix("./").lstrip("/")
    dir_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    if not pattern:
        raise ConfigError(f"deny path {text!r} names no path", field=field, fix="remove it or name a path")
    anchored = anchored or "/" in pattern
    prefix = "" if anchored else "(?:.*/)?"
    return DenyPattern(text, field, re.compile(prefix + glob_regex(pattern), re.DOTALL), dir_only)


def _denied_paths(config: EvalConfig) -> Iterator[tuple[str, str]]:
    for index, entry in enumerate(config.permissions.deny):
        where = f"permissions.deny[{index}]"
        if isinstance(entry, PathRule):
            yield entry.path, f"{where}.path"
        elif (read := _READ_RULE.match(entry.strip())) is not None:
            yield read.group(1), where
    for index, entry in enumerate(config.sandbox.filesystem.deny_read):
        yield entry, f"sandbox.filesystem.denyRead[{index}]"


@dataclass(frozen=True)
class PathDenyFilter:
    """`filter("eval/answers.yaml")` -> True when that workspace path must stay out of the container.

    A directory may be asked about with a trailing `/` (`"eval/"`); a pattern
    ending in `/` matches directories only. A path is denied when it or any
    directory above it matches.
    """

    patterns: tuple[DenyPattern, ...] = ()

    def __call__(self, rel_path: str) -> bool:
        is_dir = rel_path.endswith("/")
        segments = [s for s in rel_path.split("/") if s and s != "."]
        for depth in range(1, len(segments) + 1):
            prefix = "/".join(segments[:depth])
            prefix_is_dir = depth < len(segments) or is_dir
            if any(p.matches(prefix, prefix_is_dir) for p in self.patterns):
                return True
        return False

    def __bool__(self) -> bool:
        return bool(self.patterns)


def deny_filter(config: EvalConfig) -> PathDenyFilter:
    """The OS-level deny filter of a config (ConfigError for a pattern it cannot honour)."""
    compiled = (compile_deny_pattern(text, field) for text, field in _denied_paths(config))
    return PathDenyFilter(tuple(p for p in compiled if p is not None))
