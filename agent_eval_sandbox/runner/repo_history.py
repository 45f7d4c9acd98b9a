"""A fresh one-commit git history for a `workspace_mode: repo` copy of the project.

The project's own `.git` holds every past version of eval.yaml, the dataset
and the judges, so it never enters a sandbox. Skills that run `git status` or
`git diff` still expect a repository: the staged copy (already cleaned of the
answer key) becomes one commit of its own. git runs on the host over that
copy, which is project data, with nothing of the user's git setup: no
system or global config, a throwaway HOME, no templates (so no sample hooks),
a fixed author, committer and date (the same tree gives the same commit),
and only the environment it needs.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from agent_eval_sandbox.sandbox.held_dirs import HeldDir

COMMIT_MESSAGE = "Project snapshot for this evaluation (agent-eval-sandbox)"
_IDENTITY = "agent-eval-sandbox"
_EMAIL = "agent-eval-sandbox@localhost"
_DATE = "2000-01-01T00:00:00+0000"
GIT_TIMEOUT_S = 300


def git_env(home: Path, path_var: str) -> dict[str, str]:
    """The whole environment of the snapshot's git commands."""
    return {
        "PATH": path_var,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": _IDENTITY,
        "GIT_AUTHOR_EMAIL": _EMAIL,
        "GIT_AUTHOR_DATE": _DATE,
        "GIT_COMMITTER_NAME": _IDENTITY,
        "GIT_COMMITTER_EMAIL": _EMAIL,
        "GIT_COMMITTER_DATE": _DATE,
        "LC_ALL": "C",
    }


def commit_snapshot(tree: Path, *, path_var: str) -> str | None:
    """Make `tree` a repository with one commit of everything in it (less what its .gitignore
    ignores, as in the user's checkout). Returns None, or a note saying why `tree` has no history."""
    git = shutil.which("git", path=path_var)
    if git is None:
        return ("git is not installed on this host: the repo-mode workspace has no git history "
                "(skills that run git status or git diff will find no repository)")
    with HeldDir(Path(tempfile.gettempdir()), "aes-git-home-") as home:
        env = git_env(home.path, path_var)
        for args in (["init", "--quiet", "--template=", "--initial-branch=main"],
                     ["add", "--all"],
                     ["commit", "--quiet", "--no-verify", "--allow-empty", "-m", COMMIT_MESSAGE]):
            try:
                done = subprocess.run([git, "-C", str(tree), *args], env=env, capture_output=True, text=True,
                                      stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT_S, check=False)
                reason = done.stderr.strip()[-300:] if done.returncode else ""
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = str(exc)
            if reason:
                shutil.rmtree(tree / ".git", ignore_errors=True)  # no half-made repository goes in
                return f"git {args[0]} failed in the repo-mode copy ({reason}): the workspace has no git history"
    return None


def project_files(root: Path, *, path_var: str) -> set[str] | None:
    """The files of the project as its git checkout has them (tracked, or new and not ignored),
    relative to `root`; None when `root` is not in a git work tree or git is missing.

    A repo-mode copy takes only these: what `.gitignore` keeps out of the repository
    (a `.env` of secrets, old run directories, caches) is not part of the project the
    skill works on.
    """
    git = shutil.which("git", path=path_var)
    if git is None:
        return None
    with HeldDir(Path(tempfile.gettempdir()), "aes-git-home-") as home:
        env = git_env(home.path, path_var)
        try:
            listed = subprocess.run(
                [git, "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
                env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
    if listed.returncode != 0:
        return None
    return {name for name in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if name}

