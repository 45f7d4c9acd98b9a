"""The environment of host processes that run next to agent output: hooks, judge workers (pure).

They inherit the caller's environment, as in the reference, and must not be
made to execute what an agent wrote. Three rules:

- PATH and PYTHONPATH lose every entry that is empty or relative (it would
  resolve against the process's working directory) or inside a directory that
  holds agent output (a collected workspace, the run directory).
- A variable naming a file or directory a shell, Python, git or the dynamic
  loader executes or loads from (BASH_ENV, PYTHONSTARTUP, GIT_DIR,
  LD_PRELOAD, ...) is dropped when it points inside such a directory. The
  caller's other values are left as they are: they are the caller's own.
- git refuses a repository it was not pointed at explicitly when it is only a
  directory that looks like one (`safe.bareRepository=explicit`, added as
  command-line config through GIT_CONFIG_COUNT). Collected workspaces hold no
  `.git` at all (see `git_names`); this closes the other way git finds a
  repository, a directory with HEAD, objects/ and refs/ of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

SEARCH_PATH_VARS = ("PATH", "PYTHONPATH")
LOADED_PATH_VARS = (
    "BASH_ENV", "ENV", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE",
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR",
    "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "NODE_PATH", "PERL5LIB", "RUBYLIB",
)
GIT_PROTECTION = (("safe.bareRepository", "explicit"),)


def _inside(value: str, roots: Iterable[Path]) -> bool:
    """`value` (an absolute path) is one of `roots` or below one, lexically or once links are resolved."""
    candidates = {Path(os.path.normpath(value)), Path(os.path.realpath(value))}
    for root in roots:
        for base in {Path(os.path.normpath(root)), Path(os.path.realpath(root))}:
            if any(c == base or base in c.parents for c in candidates):
                return True
    return False


def clean_search_path(value: str, untrusted: Iterable[Path]) -> str:
    """A PATH-style list without empty, relative or untrusted entries."""
    roots = list(untrusted)
    kept = [entry for entry in value.split(os.pathsep)
            if entry and os.path.isabs(entry) and not _inside(entry, roots)]
    return os.pathsep.join(kept)


def _points_inside(value: str, roots: list[Path]) -> bool:
    # LD_PRELOAD separates by spaces or colons; the others by colons.
    pieces = value.replace(" ", os.pathsep).split(os.pathsep)
    return any(os.path.isabs(piece) and _inside(piece, roots) for piece in pieces)


def with_git_protection(env: Mapping[str, str]) -> dict[str, str]:
    """`env` plus GIT_PROTECTION as extra GIT_CONFIG_KEY_n/VALUE_n entries after the caller's own.

    A GIT_CONFIG_COUNT that is not a number already makes every git command fail;
    it is left alone.
    """
    result = dict(env)
    try:
        count = int(result.get("GIT_CONFIG_COUNT", "0") or "0")
    except ValueError:
        return result
    if count < 0:
        return result
    for key, value in GIT_PROTECTION:
        result[f"GIT_CONFIG_KEY_{count}"] = key
        result[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    result["GIT_CONFIG_COUNT"] = str(count)
    return result


def untrusted_free_env(env: Mapping[str, str], untrusted: Iterable[Path]) -> dict[str, str]:
    """`env` under the three rules of this module; `untrusted` are the directories holding agent output."""
    roots = list(untrusted)
    result = dict(env)
    for name in SEARCH_PATH_VARS:
        if name in result:
            cleaned = clean_search_path(result[name], roots)
            if cleaned:
                result[name] = cleaned
            elif name == "PATH":
                result[name] = os.defpath.lstrip(os.pathsep)  # a PATH of nothing but relative entries
            else:
                del result[name]
    for name in LOADED_PATH_VARS:
        if name in result and _points_inside(result[name], roots):
            del result[name]
    return with_git_protection(result)
