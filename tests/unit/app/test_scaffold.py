"""`init`: the starter eval it writes loads clean, and it never writes over a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.app.scaffold import write_scaffold
from agent_eval_sandbox.app.validate import checked_eval
from agent_eval_sandbox.config.settings import CliOverrides
from agent_eval_sandbox.errors import UserError


def test_the_starter_eval_passes_every_check_offline(tmp_path: Path) -> None:
    written = write_scaffold(tmp_path / "my eval", schema_text="{}")
    assert (tmp_path / "my eval" / "eval.schema.json") in written
    warnings: list[str] = []
    checked = checked_eval(tmp_path / "my eval" / "eval.yaml", CliOverrides(), offline=True, claude_version=None,
                           warn=warnings.append)
    assert warnings == []
    assert checked.dataset.ids == ["001-shopping", "002-reading"]
    assert checked.loaded.config.name == "my-eval"
    assert [j.name for j in checked.loaded.config.judges] == ["note_written", "exited_cleanly"]
    assert set(checked.loaded.config.thresholds) == {"note_written", "exited_cleanly"}


def test_it_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "cases" / "001-shopping").mkdir(parents=True)
    mine = tmp_path / "cases" / "001-shopping" / "input.yaml"
    mine.write_text("mine")
    with pytest.raises(UserError, match="input.yaml exists already"):
        write_scaffold(tmp_path, schema_text="{}")
    assert mine.read_text() == "mine"
    assert not (tmp_path / "eval.yaml").exists()
