"""Agent judges end to end: each sample a real `claude -p` in a sandbox of its own, on a scripted model.

One offline run, two cases (`good` wrote three "hello" lines, `lazy` wrote none), and one agent
judge per behaviour of the output contract: a verdict in output/score.json computed by grepping
the staged outputs with Bash; a verdict only in the final answer (the stdout fallback); nothing
usable (an error sample); three samples reduced by their median; a verdict written before the
judge went over its budget, and one written before its timeout (both error samples: an
unfinished run's verdict does not count). A third case never runs (its before_each hook fails): no agent
judge starts for it. `score` then judges the finished run again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"
# The judge's Bash computes its score from what was staged: the number of "hello" lines of the case.
GREP_AND_SCORE = ('n=$(grep -c hello out/a.txt || true); '
                  'printf \'{"score": %s, "rationale": "%s hello lines"}\' "$n" "$n" > output/score.json')


def _write(path: Path, steps: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(steps, sort_keys=False))


def _project(project) -> None:
    project.eval_yaml("""
        name: e2e-agent-judges
        execution: {skill: scribe, arguments: "{task}", timeout: 120, parallelism: 3}
        models: {skill: claude-sonnet-4-6, judge: claude-haiku-4-5}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
        outputs: [{path: out}]
        judges:
          - name: grep
            llm_rubric: "Count the hello lines in out/a.txt."
            score_range: [0, 5]
            agent: {allowed_tools: [Bash, Read], timeout: 120}
          - name: fallback
            llm_rubric: "Did the agent write a file?"
            feedback_type: bool
            agent: {allowed_tools: [Read], timeout: 120}
          - name: mute
            llm_rubric: "Anything."
            score_range: [1, 5]
            agent: {timeout: 120}
          - name: sampled
            llm_rubric: "Rate it."
            score_range: [1, 5]
            samples: 3
            if: "'hello' in outputs.get('out_content', '')"
            agent: {allowed_tools: [Bash], timeout: 120}
          - name: spendthrift
            llm_rubric: "Rate it."
            score_range: [1, 5]
            if: "'hello' in outputs.get('out_content', '')"
            agent: {allowed_tools: [Bash], timeout: 120, max_budget_usd: 0.5}
          - name: slow
            llm_rubric: "Rate it."
            score_range: [1, 5]
            if: "'hello' in outputs.get('out_content', '')"
            agent: {allowed_tools: [Bash], timeout: 6}
        hooks:
          before_each:
            - command: 'test "$CASE_ID" != unrun'
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    good = [{"tool": "Bash", "input": {"command": "mkdir -p out && printf 'hello\\nhello\\nhello\\n' > out/a.txt"}},
            {"text": "wrote it"}]
    lazy = [{"tool": "Bash", "input": {"command": "mkdir -p out && echo nothing > out/a.txt"}}, {"text": "meh"}]
    project.case("good", {"task": "write"}, script=good)
    project.case("lazy", {"task": "write"}, script=lazy)
    project.case("unrun", {"task": "write"}, script=good)  # its before_each hook fails: its agent never runs
    scripts = project.root / "judge_scripts"
    _write(scripts / "grep.yaml", [{"tool": "Bash", "input": {"command": GREP_AND_SCORE}}, {"text": "scored"}])
    _write(scripts / "fallback.yaml", [{"text": 'Looked at it. {"passed": true, "rationale": "a file is there"}'}])
    _write(scripts / "mute.yaml", [{"text": "I have no opinion."}])
    for sample, score in ((1, 2), (2, 5), (3, 4)):
        write_score = f"echo '{{\"score\": {score}, \"rationale\": \"sample {sample}\"}}' > output/score.json"
        _write(scripts / f"sampled.{sample}.yaml", [{"tool": "Bash", "input": {"command": write_score}},
                                                   {"text": "done"}])
    # A verdict on disk first, then a turn that costs far more than the judge's budget, then more work.
    _write(scripts / "spendthrift.yaml", [
        {"tool": "Bash", "input": {"command": "echo '{\"score\": 5, \"rationale\": \"x\"}' > output/score.json"}},
        {"tool": "Bash", "input": {"command": "true"}, "usage": {"input_tokens": 5_000_000, "output_tokens": 10}},
        {"tool": "Bash", "input": {"command": "true"}},
        {"text": "done"},
    ])
    _write(scripts / "slow.yaml", [
        {"tool": "Bash", "input": {"command": "echo '{\"score\": 5, \"rationale\": \"x\"}' > output/score.json"}},
        {"tool": "Bash", "input": {"command": "python3 -c 'import time; time.sleep(300)'", "timeout": 600000}},
        {"text": "done"},
    ])


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory):
    from tests.integration.e2e.conftest import EvalProject

    project = EvalProject(tmp_path_factory.mktemp("agent-judges") / "project")
    _project(project)
    result = project.run("--offline")
    assert result.run_dir is not None, result.process.stderr[-4000:]
    assert "Traceback" not in result.process.stderr, result.process.stderr[-4000:]
    return project, result


def _per_case(result) -> dict[str, Any]:
    return yaml.safe_load((result.run_dir / "summary.yaml").read_text())["per_case"]


def test_a_judge_greps_the_staged_outputs_with_bash_and_writes_score_json(judged):
    _, result = judged
    per_case = _per_case(result)
    assert per_case["good"]["grep"]["value"] == 3, per_case["good"]["grep"]
    assert per_case["lazy"]["grep"]["value"] == 0, per_case["lazy"]["grep"]
    sample = result.case("good") / "_judges" / "grep" / "1"
    assert json.loads((sample / "output" / "score.json").read_text())["score"] == 3
    record = json.loads((sample / "result.json").read_text())
    assert record["end_reason"] == "exited" and record["wrote_score_file"] is True
    assert record["gateway"]["requests"] == 2 and record["integrity"]["findings"] == []
    # The judge's own request log and prompt (with the output contract and the untrusted-data guard).
    assert (sample / "gateway.jsonl").is_file()
    prompt = (sample / "prompt.txt").read_text()
    assert "Count the hello lines" in prompt and "output/score.json" in prompt and "untrusted" in prompt


def test_without_score_json_the_last_json_verdict_of_the_answer_counts(judged):
    _, result = judged
    verdict = _per_case(result)["good"]["fallback"]
    assert verdict["value"] is True and "a file is there" in verdict["rationale"], verdict
    assert not (result.case("good") / "_judges" / "fallback" / "1" / "output" / "score.json").exists()


def test_a_judge_that_gives_nothing_usable_is_an_error_never_a_pass(judged):
    _, result = judged
    for case in ("good", "lazy"):
        verdict = _per_case(result)[case]["mute"]
        assert verdict.get("error") and verdict.get("value") is None, verdict
        assert "no output/score.json" in verdict["error"], verdict


def test_three_samples_each_in_its_own_sandbox_reduced_by_median(judged):
    _, result = judged
    verdict = _per_case(result)["good"]["sampled"]
    assert verdict["value"] == 4, verdict
    samples = sorted(p.name for p in (result.case("good") / "_judges" / "sampled").iterdir())
    assert samples == ["1", "2", "3"]
    assert _per_case(result)["lazy"]["sampled"]["status"] == "skipped", "the `if` is false on lazy: no sandbox"
    assert not (result.case("lazy") / "_judges" / "sampled").exists()


def test_over_budget_is_an_error_even_with_a_verdict_on_disk(judged):
    _, result = judged
    verdict = _per_case(result)["good"]["spendthrift"]
    assert verdict.get("value") is None and "budget" in verdict["error"], verdict
    record = json.loads((result.case("good") / "_judges" / "spendthrift" / "1" / "result.json").read_text())
    assert record["end_reason"] == "budget_exhausted" and record["wrote_score_file"] is True, record


def test_past_its_timeout_is_an_error_even_with_a_verdict_on_disk(judged):
    _, result = judged
    verdict = _per_case(result)["good"]["slow"]
    assert verdict.get("value") is None and "timeout" in verdict["error"], verdict
    record = json.loads((result.case("good") / "_judges" / "slow" / "1" / "result.json").read_text())
    assert record["end_reason"] == "timed_out" and record["duration_s"] < 120, record


def test_score_judges_the_finished_run_again_in_new_sandboxes(judged):
    project, result = judged
    marker = result.case("good") / "_judges" / "grep" / "1" / "result.json"
    before = marker.stat().st_mtime_ns
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "score", str(result.run_dir), "--offline", "--json"],
        capture_output=True, text=True, timeout=900, env=env, cwd=project.root,
    )
    assert process.returncode in (0, 1), process.stderr[-3000:]
    assert "Traceback" not in process.stderr, process.stderr[-3000:]
    assert _per_case(result)["good"]["grep"]["value"] == 3
    assert marker.stat().st_mtime_ns != before


def test_a_case_that_never_ran_is_not_judged_by_an_agent(judged):
    _, result = judged
    assert result.case_result("unrun")["end_reason"] == "hook_failed"
    for name in ("grep", "fallback", "mute"):
        verdict = _per_case(result)["unrun"][name]
        assert verdict["status"] == "not_run" and verdict["value"] is None, verdict
    assert not (result.case("unrun") / "_judges").exists()
