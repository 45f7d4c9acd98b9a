"""The run directory: where each artifact of a run lives (see docs/run-directory.md)."""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent_eval_sandbox.errors import UserError

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
DEFAULT_RUNS_DIR = "eval/runs"


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{secrets.token_hex(3)}"


def validate_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.match(run_id) or run_id in (".", ".."):
        raise UserError(
            f"--run-id {run_id!r} is not a valid run id",
            fix="use letters, digits, '.', '_' and '-' only",
        )
    return run_id


def runs_base(cli_value: str | None, environ: dict[str, str] | os._Environ[str]) -> Path:
    """`--runs-dir`, else $AGENT_EVAL_RUNS_DIR, else eval/runs."""
    return Path(cli_value or environ.get("AGENT_EVAL_RUNS_DIR") or DEFAULT_RUNS_DIR)


def _safe_component(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")
    return cleaned or "eval"


@dataclass(frozen=True)
class RunDir:
    root: Path

    @classmethod
    def create(cls, base: Path, eval_name: str, run_id: str) -> RunDir:
        root = base / _safe_component(eval_name) / run_id
        if root.exists():
            raise UserError(f"run directory {root} already exists", fix="choose another --run-id")
        (root / "cases").mkdir(parents=True)
        (root / "hooks").mkdir()
        return cls(root)

    def case(self, case_id: str) -> Path:
        path = self.root / "cases" / case_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def hooks(self) -> Path:
        return self.root / "hooks"


# File names from a sandbox need not be UTF-8: Python carries their bytes as lone
# surrogates. Written with backslashreplace they become `\udcff` escapes — in
# JSON exactly the escape that reads back as the same string — never a crash.
TEXT_ERRORS = "backslashreplace"


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader never sees half a file, even after Ctrl-C."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8",
                                     errors=TEXT_ERRORS) as tmp:
        json.dump(data, tmp, indent=2, ensure_ascii=False, default=str)
        tmp.write("\n")
    os.replace(tmp.name, path)


def write_yaml(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8",
                                     errors=TEXT_ERRORS) as tmp:
        yaml.safe_dump(data, tmp, sort_keys=False, allow_unicode=True)
    os.replace(tmp.name, path)
