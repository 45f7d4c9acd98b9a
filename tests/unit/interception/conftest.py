from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config


@pytest.fixture
def load_eval(tmp_path: Path) -> Callable[..., LoadedConfig]:
    """Write eval.yaml (dedented) plus extra files under tmp_path, and load it."""

    def load(text: str, files: dict[str, str] | None = None) -> LoadedConfig:
        for name, content in (files or {}).items():
            target = tmp_path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(content))
        path = tmp_path / "eval.yaml"
        path.write_text(textwrap.dedent(text))
        return load_eval_config(path)

    return load
