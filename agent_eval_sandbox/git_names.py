"""Names that git treats as a repository's `.git` (pure).

Nothing copied out of a sandbox may carry one: a host `git` run in or below
the collected workspace would read its config (core.fsmonitor, hooks, a
`gitdir:` pointer) and run what the agent put there. The match is as loose as
the file systems git itself guards against: case-insensitive (macOS, Windows),
HFS+'s ignored code points, NTFS's trailing dots and spaces and its 8.3 name.
"""

from __future__ import annotations

# Code points HFS+ ignores when it compares names: ".g\u200cit" is ".git" there.
_HFS_IGNORED = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def is_git_dir_name(name: str) -> bool:
    """Whether a path component would be taken for `.git` on some file system."""
    folded = name.translate(_HFS_IGNORED).casefold().rstrip(". ")
    return folded in (".git", "git~1")
