"""A real run judged on the host: check, builtin and LLM judges (a scripted judge model)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"


def _project(project, thresholds: str) -> None:
    project.eval_yaml(f"""
        name: e2e-judging
        execution: {{skill: scribe, arguments: "{{task}}", timeout: 120}}
        models: {{skill: claude-sonnet-4-6, judge: claude-haiku-4-5}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        outputs: [{{path: out}}]
        judges:
          - name: wrote_file
            check: |
              content = outputs.get("out_content", "")
              return ("hello" in content), f"out_content={{content!r}}"
          - name: quality
            llm_rubric: "The agent wrote a friendly file."
            score_range: [1, 5]
          - name: budget
            builtin: cost_budget
            arguments: {{max_cost_usd: 5}}
        thresholds:
{thresholds}
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    good = [{"tool": "Bash", "input": {"command": "mkdir -p out && echo hello > out/a.txt"}}, {"text": "wrote it"}]
    bad = [{"text": "I will not write anything."}]
    project.case("good", {"task": "write"}, script=good)
    project.case("lazy", {"task": "write"}, script=bad)
    # the judge model answers per request, cases in order: good then lazy
    project.write("judge_script.yaml", yaml.safe_dump([
        {"tool": "submit_score", "input": {"score": 5, "rationale": "friendly file"}},
        {"tool": "submit_score", "input": {"score": 2, "rationale": "no file at all"}},
    ]))


def test_thresholds_met_exit_0_and_reports_written(project):
    _project(project, "          wrote_file: {min_pass_rate: 0.5}\n          quality: {min_mean: 3.0}")
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    score = json.loads(result.process.stdout)["score"]
    assert score["exit_code"] == 0 and score["regressions"] == []
    summary = yaml.safe_load((result.run_dir / "summary.yaml").read_text())
    assert summary["judges"]["quality"]["mean"] == 3.5
    assert summary["judges"]["wrote_file"]["pass_rate"] == 0.5
    per_case = summary["per_case"]
    assert per_case["good"]["quality"]["value"] == 5 and per_case["lazy"]["quality"]["value"] == 2
    for name in ("report.html", "junit.xml", "summary.json"):
        assert (result.run_dir / name).is_file()
    # report.html holds what the real CLI did, inline: the prompt, the tool call and its input, the final
    # text, the collected file; the lazy case's failing verdict is listed before any case's detail.
    report = (result.run_dir / "report.html").read_text(encoding="utf-8")
    for shown in ("/scribe write", '<span class="tname">Bash</span>', "mkdir -p out &amp;&amp; echo hello &gt; out/a.txt",
                  "wrote it", "I will not write anything.", "out/a.txt", "claude-sonnet-4-6", "scripted"):
        assert shown in report, shown
    start = report.index('<section id="failures">')
    failures = report[start:report.index("</section>", start)]
    assert "Failing verdicts" in failures and ">lazy<" in failures and ">good<" not in failures
    assert 'href="cases/' not in report


def test_a_failed_threshold_exits_1_and_names_it(project):
    _project(project, "          wrote_file: {min_pass_rate: 1.0}")
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline",
         "--runs-dir", str(project.runs)],
        capture_output=True, text=True, timeout=600,
    )
    assert process.returncode == 1, process.stderr
    assert "REGRESSIONS: 1 detected" in process.stdout
    assert "[wrote_file] pass_rate: >= 1.0 -> 0.5" in process.stdout
    # score re-judges without re-running; report rebuilds: same verdict, same exit code
    run_dir = next(project.runs.glob("e2e-judging/*"))
    rescore = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "score", str(run_dir), "--json"],
                             capture_output=True, text=True, timeout=300,
                             env={"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "unused"})
    assert rescore.returncode == 1, rescore.stderr
    rebuilt = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "report", str(run_dir)],
                             capture_output=True, text=True, timeout=120)
    assert rebuilt.returncode == 1 and "[wrote_file] pass_rate: >= 1.0 -> 0.5" in rebuilt.stdout
