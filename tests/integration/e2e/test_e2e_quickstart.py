"""The README's main job: the shipped quickstart eval, offline, in real containers, every judge green
and every line of every conversation vouched for by the gateway."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.integration.e2e.conftest import EvalProject

pytestmark = pytest.mark.docker

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"


def test_the_quickstart_passes_and_its_conversations_are_whole(tmp_path: Path) -> None:
    root = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, root)
    result = EvalProject(root).run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    assert result.run_dir is not None
    summary = yaml.safe_load((result.run_dir / "summary.yaml").read_text())
    assert summary["thresholds"]["passed"] is True
    for case_id, verdicts in summary["per_case"].items():
        assert all(v["value"] is True for v in verdicts.values()), (case_id, verdicts)
    cases = sorted(p.name for p in (QUICKSTART / "cases").iterdir())
    assert sorted(summary["per_case"]) == cases
    for case_id in cases:
        outcome = result.case_result(case_id)
        assert outcome["end_reason"] == "exited" and outcome["exit_code"] == 0, outcome
        # The CLI's stream prints tool inputs with defaults filled in (Edit's replace_all): the check
        # against the gateway's record must still vouch for every line.
        assert outcome["integrity"]["checked"] and outcome["integrity"]["findings"] == [], outcome["integrity"]
        scripted = yaml.safe_load((QUICKSTART / "cases" / case_id / "model_script.yaml").read_text())
        called = [t["name"] for e in result.events(case_id) if e["type"] == "assistant" for t in e["tools"]]
        assert called == [step["tool"] for step in scripted if "tool" in step], case_id
