"""The `latest` link of each eval's runs (`<runs-dir>/<eval>/latest`), and reading `latest` back.

The link is moved when a run *starts* (right after its directory is made), not when it finishes: the
run one most wants to look at, resume or score after Ctrl-C is the one that did not finish. It is
replaced atomically (a new link renamed over the old), so a reader never sees it missing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.rundir.layout import LATEST, RUN_JSON, RunDir

LATEST_ARG = "latest"


def point_latest(run: RunDir) -> Path:
    """Make `<eval dir>/latest` point at this run (relative, so the runs dir can move)."""
    link = run.root.parent / LATEST
    temporary = run.root.parent / f".{LATEST}.{secrets.token_hex(4)}"
    os.symlink(run.root.name, temporary)
    try:
        os.replace(temporary, link)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return link


def resolve_run_arg(value: Path, runs_base: Path) -> Path:
    """A RUN_DIR argument as given, or `latest`: the newest `latest` link under the runs directory
    (of any eval; `<runs-dir>/<eval>/latest` names one eval's)."""
    if str(value) != LATEST_ARG or value.exists():
        return value
    links = [p for p in runs_base.glob(f"*/{LATEST}") if p.is_symlink() and p.resolve().is_dir()]
    if not links:
        raise UserError(f"no run to call 'latest' under {runs_base}",
                        fix="run an eval first, or give the run directory (or --runs-dir)")
    newest = max(links, key=lambda p: p.lstat().st_mtime_ns)
    return newest.resolve()


def eval_runs(runs_base: Path) -> list[Path]:
    """Every run directory under the runs directory (`<eval>/<run-id>/` holding run.json), oldest first."""
    runs = [p.parent for p in runs_base.glob(f"*/*/{RUN_JSON}")
            if not p.parent.is_symlink() and not p.parent.name.startswith(".")]
    return sorted(runs, key=lambda p: (p / RUN_JSON).stat().st_mtime_ns)
