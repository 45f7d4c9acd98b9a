"""Lifecycle hooks wired into real runs: host and container scope around the real agent."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"


def _project(project, hooks: str) -> None:
    project.eval_yaml(f"""
        name: e2e-hooks
        execution: {{skill: scribe, arguments: "{{task}}", timeout: 120}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        hooks:
{hooks}
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)


def test_hooks_prepare_the_case_and_hand_env_and_data_to_the_agent_and_judges(project):
    _project(project, """
          before_all:
            - command: 'printf "env: {GLOBAL_TOKEN: g-1, SHARED: from-all}\\ndata: {suite: s1}\\n" > "$AGENT_EVAL_WORKSPACE/.hook-outputs.yaml"'
          before_each:
            - description: seed on the host
              command: 'echo "seeded for $CASE_ID" > seeded.txt; printf "env: {SHARED: from-case}\\ndata: {rows: 42}\\n" > .hook-outputs.yaml'
            - description: inside the sandbox
              scope: container
              command: 'id -u > whoami.txt; echo "$CASE_WORKSPACE $CASE_INPUT [$AGENT_EVAL_CONFIG]" > paths.txt'
          after_each:
            - scope: container
              command: 'test -f result.txt && echo after-each-saw-result'
            - command: 'cat "$CASE_WORKSPACE/result.txt"'
    """)
    probe = "cat seeded.txt whoami.txt paths.txt; echo G=$GLOBAL_TOKEN S=$SHARED; echo ok > result.txt"
    project.case("c1", {"task": "go"}, script=[{"tool": "Bash", "input": {"command": probe}}, {"text": "done"}])
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    output = "\n".join(result.tool_results("c1"))
    assert "seeded for c1" in output
    assert "1000" in output  # the container hook ran as the sandbox user
    assert "/workspace /workspace/input.yaml []" in output  # container paths; no path to the answer key
    assert "G=g-1 S=from-case" in output  # before_all env global, before_each wins
    hooks_dir = result.run_dir / "hooks"
    names = sorted(p.name for p in hooks_dir.iterdir())
    assert names == ["after_each.c1.0.log", "after_each.c1.1.log", "before_all.0.log",
                     "before_each.c1.0.log", "before_each.c1.1.log"]
    assert "after-each-saw-result" in (hooks_dir / "after_each.c1.0.log").read_text()
    assert "ok" in (hooks_dir / "after_each.c1.1.log").read_text()
    run_outputs = yaml.safe_load((result.run_dir / "hook_outputs.yaml").read_text())
    assert run_outputs == {"before_all": {"suite": "s1"}, "cases": {"c1": {"rows": 42}}}
    for line in ("before_all.0", "before_each.c1.0", "before_each.c1.1", "after_each.c1.0", "after_each.c1.1"):
        assert f"hook {line}:" in result.process.stderr and "... OK" in result.process.stderr
    # the hook's own files are not the agent's changes
    diff = (result.case("c1") / "workspace.diff").read_text()
    assert "result.txt" in diff and ".hook-outputs" not in diff


def test_failing_before_each_skips_the_agent_but_after_each_still_runs(project):
    _project(project, """
          before_each:
            - command: 'echo broken; exit 5'
          after_each:
            - command: 'echo cleanup-ran-for-$CASE_ID'
    """)
    project.case("c1", {"task": "go"}, script=[{"tool": "Bash", "input": {"command": "echo agent-ran"}}, {"text": "x"}])
    project.case("c2", {"task": "go"}, script=[{"text": "x"}])
    result = project.run("--offline")
    assert result.process.returncode == 1, result.process.stderr  # no case completed: never green
    for case_id in ("c1", "c2"):
        entry = result.case_result(case_id)
        assert entry["end_reason"] == "hook_failed" and "FAIL (exit 5)" in entry["error"]
        assert not (result.case(case_id) / "stdout.log").exists() or "agent-ran" not in (result.case(case_id) / "stdout.log").read_text()
        assert f"cleanup-ran-for-{case_id}" in (result.run_dir / "hooks" / f"after_each.{case_id}.0.log").read_text()


def test_failing_before_all_aborts_the_run_and_after_all_runs(project):
    _project(project, """
          before_all:
            - command: 'exit 3'
          after_all:
            - command: 'echo teardown > "$AGENT_EVAL_PROJECT_ROOT/after_all_ran"'
    """)
    project.case("c1", {"task": "go"}, script=[{"text": "x"}])
    result = project.run("--offline")
    assert result.process.returncode == 2
    assert "before_all" in result.process.stderr and "Traceback" not in result.process.stderr
    assert (project.root / "after_all_ran").read_text() == "teardown\n"
    runs = list(project.runs.rglob("run_result.json"))
    assert not any("cases" in str(p) for p in runs)
