"""Writing the run directory: atomic, and never undone by a name that is not UTF-8.

Atomic: a reader (a report, `score` after Ctrl-C) never sees half a file.
File names from a sandbox need not be UTF-8; Python carries their bytes as
lone surrogates. Text is written with backslashreplace, which turns them into
`\\udcff` escapes — in JSON exactly the escape that reads back as the same
string — never a crash.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

TEXT_ERRORS = "backslashreplace"


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8",
                                     errors=TEXT_ERRORS) as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def write_yaml(path: Path, data: Any) -> None:
    write_text(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False))


def append_text(path: Path, text: str) -> None:
    """Append to a log (e.g. a note at the end of a case's stderr.log)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", errors=TEXT_ERRORS) as handle:
        handle.write(text)
