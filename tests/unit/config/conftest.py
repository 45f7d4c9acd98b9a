from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def write_eval(tmp_path: Path):
    """Write an eval.yaml (dedented) and return its path."""

    def write(text: str, name: str = "eval.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def make_case(tmp_path: Path):
    """Create a case directory under tmp_path/cases with the given files."""

    def make(case_id: str, files: dict[str, str], root: str = "cases") -> Path:
        case_dir = tmp_path / root / case_id
        case_dir.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            target = case_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(content))
        return case_dir

    return make
