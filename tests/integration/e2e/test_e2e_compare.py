"""Baseline comparison on real offline runs of the quickstart: a run where the greeter regresses, compared
with the sound baseline (`run --baseline` and `compare`), the pairwise judge on a scripted judge model
that is asked both ways round, and the reward written per case."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_eval_sandbox.app.compare import compare_runs
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import parse_script
from agent_eval_sandbox.model_api import ModelEndpoint
from tests.integration.e2e.conftest import EvalProject

pytestmark = pytest.mark.docker

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"
GOOD = {"001-greet-ada": "Hello, Ada!", "002-greet-grace": "Hello, Grace!"}
WRONG = "Hello, World!"
PAIRWISE_PROMPT = "Which greeting is better?\n\nFirst:\n{{ output_a }}\n\nSecond:\n{{ output_b }}\n"


def _verdict(preferred: str) -> dict[str, Any]:
    return {"tool": "submit_comparison", "input": {"preferred": preferred, "reasoning": f"scripted {preferred}"}}


# Two requests per case, in case order, the run shown first then the baseline shown first:
# 001 the baseline preferred both ways, 002 always the first slot (position bias), 003 the run both ways.
PAIRWISE_SCRIPT = [_verdict(p) for p in ("B", "A", "A", "A", "A", "B")]


@dataclass(frozen=True)
class Runs:
    project: EvalProject
    baseline: Path
    candidate: Path
    candidate_process: subprocess.CompletedProcess[str]


def _greet(name: str, text: str) -> list[dict[str, Any]]:
    return [{"tool": "Bash", "input": {"command": f"mkdir -p artifacts && printf '{text}\\n' > artifacts/greeting.md"}},
            {"text": f"I wrote artifacts/greeting.md for {name}."}]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("compare") / "quickstart"
    shutil.copytree(QUICKSTART, root)
    config = yaml.safe_load((root / "eval.yaml").read_text())
    # Without thresholds, an exit code of 1 below can only come from the comparison.
    config.pop("thresholds", None)
    config["judges"].append({"name": "pairwise", "prompt": PAIRWISE_PROMPT, "model": "claude-haiku-4-5"})
    config["reward"] = {"formula": "0.5 * greeted + 0.5 * finished_cleanly", "gate": False}
    (root / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (root / "pairwise_script.yaml").write_text(yaml.safe_dump(PAIRWISE_SCRIPT, sort_keys=False))
    project = EvalProject(root)
    baseline = project.run("--offline", "--run-id", "baseline")
    assert baseline.process.returncode == 0, baseline.process.stderr
    assert baseline.run_dir is not None
    # The run under test: the greeter greets the world instead of the person in two cases, and in a new one.
    for case_id in GOOD:
        (root / "cases" / case_id / "model_script.yaml").write_text(yaml.safe_dump(_greet(case_id, WRONG)))
    shutil.copytree(root / "cases" / "001-greet-ada", root / "cases" / "004-greet-lin")
    (root / "cases" / "004-greet-lin" / "input.yaml").write_text(yaml.safe_dump({"name": "Lin"}))
    (root / "cases" / "004-greet-lin" / "annotations.yaml").write_text(yaml.safe_dump({"expected": "Hello, Lin!"}))
    (root / "cases" / "004-greet-lin" / "model_script.yaml").write_text(yaml.safe_dump(_greet("Lin", WRONG)))
    candidate = project.run("--offline", "--run-id", "candidate", "--baseline", str(baseline.run_dir),
                            "--fail-on-regression")
    assert candidate.run_dir is not None, candidate.process.stderr
    return Runs(project, baseline.run_dir, candidate.run_dir, candidate.process)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.run([sys.executable, "-m", "agent_eval_sandbox", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_run_with_a_baseline_shows_the_regression_with_its_delta_and_statistic(runs: Runs) -> None:
    # --fail-on-regression: exit 1 because `greeted` regressed (the eval has no thresholds to fail).
    assert runs.candidate_process.returncode == 1, runs.candidate_process.stderr
    comparison = json.loads(runs.candidate_process.stdout)["comparison"]
    assert comparison["exit_code"] == 1
    greeted = comparison["judges"]["greeted"]
    assert greeted["verdict"] == "regressed"
    assert greeted["b"] == 1.0 and greeted["a"] == pytest.approx(0.25)  # each run's own pass rate: 1 of 4 here
    # Paired by id over the three cases both runs have: two worse, one the same. The exact sign-flip
    # p-value of (-1, -1, 0) is 2/4, not significant: the regression is the reference's rule, the pass rate
    # dropped by more than 0.5.
    assert (greeted["n"], greeted["worse"], greeted["better"], greeted["same"]) == (3, 2, 0, 1)
    assert greeted["mean_delta"] == pytest.approx(-2 / 3)
    assert greeted["p_value"] == pytest.approx(0.5)
    assert greeted["ci_low"] < greeted["mean_delta"] < greeted["ci_high"]
    assert comparison["judges"]["finished_cleanly"]["verdict"] == "no significant change"
    assert comparison["only_in_a"] == ["004-greet-lin"] and comparison["only_in_b"] == []
    assert comparison["paired_cases"] == 3
    assert {c["case"] for c in greeted["changed"]} == set(GOOD)
    # The terminal's table is the JSON's; the files are in the run under test's directory.
    stored = json.loads((runs.candidate / "comparison.json").read_text())
    assert stored["judges"]["greeted"]["p_value"] == greeted["p_value"]
    assert stored["regressions"] and stored["regressions"][0].startswith("[greeted] pass_rate_vs_baseline: 1.0 -> ")
    report = (runs.candidate / "report.html").read_text(encoding="utf-8")
    start = report.index('<section id="comparison">')
    section = report[start:report.index("</section>", start)]
    assert "Regressed against the baseline: greeted" in section
    assert "004-greet-lin" in section and "sign-flip" in section
    assert not (runs.baseline / "comparison.json").exists()  # the baseline is only read


def test_the_pairwise_judge_tallies_both_orders(runs: Runs) -> None:
    pairwise = json.loads((runs.candidate / "comparison.json").read_text())["pairwise"]
    winners = {case["case_id"]: (case["winner"], case["pref_ab"], case["pref_ba"]) for case in pairwise["per_case"]}
    assert winners == {"001-greet-ada": ("B", "B", "A"), "002-greet-grace": ("tie", "A", "A"),
                       "003-fix-typo": ("A", "A", "B")}
    assert (pairwise["wins_a"], pairwise["wins_b"], pairwise["ties"], pairwise["errors"]) == (1, 1, 1, 0)
    assert pairwise["win_rate"] == pytest.approx(1 / 3)
    summary = yaml.safe_load((runs.candidate / "summary.yaml").read_text())
    assert summary["pairwise"]["wins_a"] == 1
    assert "pairwise" not in summary["judges"]  # the reserved judge is never scored per case


def test_the_reward_is_in_each_case_record_and_the_summary(runs: Runs) -> None:
    summary = yaml.safe_load((runs.candidate / "summary.yaml").read_text())
    per_case = {case: data["reward"] for case, data in summary["reward"]["per_case"].items()}
    assert per_case == {"001-greet-ada": 0.5, "002-greet-grace": 0.5, "003-fix-typo": 1.0, "004-greet-lin": 0.5}
    assert summary["reward"]["mean"] == pytest.approx(0.625)
    record = json.loads((runs.candidate / "cases" / "001-greet-ada" / "reward.json").read_text())
    assert record["reward"] == 0.5
    baseline = yaml.safe_load((runs.baseline / "summary.yaml").read_text())
    assert baseline["reward"]["mean"] == 1.0


def test_compare_exit_code_is_1_only_under_the_flag_and_only_for_a_regression(runs: Runs) -> None:
    plain = _cli("compare", str(runs.candidate), str(runs.baseline), "--offline", "--json")
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["judges"]["greeted"]["verdict"] == "regressed"
    flagged = _cli("compare", str(runs.candidate), str(runs.baseline), "--offline", "--fail-on-regression")
    assert flagged.returncode == 1, flagged.stderr
    assert "REGRESSIONS vs baseline: 1 detected" in flagged.stdout
    assert "[greeted] pass_rate_vs_baseline: 1.0 -> 0.25" in flagged.stdout
    # The other way round the same change is an improvement: nothing regressed, exit 0 under the flag.
    reverse = _cli("compare", str(runs.baseline), str(runs.candidate), "--offline", "--fail-on-regression", "--json")
    assert reverse.returncode == 0, reverse.stderr
    reversed_data = json.loads(reverse.stdout)
    assert reversed_data["judges"]["greeted"]["verdict"] == "improved"
    assert reversed_data["only_in_b"] == ["004-greet-lin"]


@contextmanager
def _recording(server: ScriptedModelServer) -> Iterator[ModelEndpoint]:
    with server:
        yield ModelEndpoint(base_url=server.url, api_key="offline")


def test_the_pairwise_judge_model_sees_each_case_both_ways_round(runs: Runs) -> None:
    server = ScriptedModelServer(parse_script({"steps": PAIRWISE_SCRIPT, "advance": "per_request"}))
    compare_runs(runs.candidate, runs.baseline, endpoint=lambda _loaded: _recording(server), environ={})
    prompts = [r.body["messages"][0]["content"] for r in server.requests if isinstance(r.body, dict)]
    assert len(prompts) == 6
    for (run_first, baseline_first), (case_id, good) in zip(
            [(prompts[0], prompts[1]), (prompts[2], prompts[3])], GOOD.items(), strict=True):
        # The run under test wrote the wrong greeting, the baseline the right one; each is shown first once.
        assert run_first.index(WRONG) < run_first.index(good), case_id
        assert baseline_first.index(good) < baseline_first.index(WRONG), case_id
        # Blind: neither slot says which run it came from.
        assert "candidate" not in run_first and "baseline" not in run_first.lower()
