"""A pipeline's case through runner/case.py on the fake sandbox backend (the step loop's orchestration).

The model is the scripted server behind the real gateway, one script per step;
the agent is `FakeCli`. The end-to-end run is tests/integration/e2e/test_e2e_pipeline.py.
"""

from __future__ import annotations

import json
import textwrap

import yaml

from agent_eval_sandbox.sandbox.base import SandboxError
from agent_eval_sandbox.sandbox.fake import ExecCall
from tests.unit.runner.fake_cli import is_agent

EVAL = """
name: fake-pipeline
models: {skill: claude-sonnet-4-6}
runner: {permission_mode: bypassPermissions}
dataset: {path: cases}
outputs: [{path: out}]
execution:
  timeout: 60
  max_budget_usd: 5
  steps:
    - {id: one, prompt: "first {{ input.task }}", on_failure: continue}
    - {id: two, prompt: "second after {{ steps.one.output }}"}
"""


def _project(eval_project, scripts: dict[str, list]) -> None:
    eval_project.write("eval.yaml", textwrap.dedent(EVAL))
    case_dir = eval_project.root / "cases" / "c1"
    case_dir.mkdir(parents=True)
    (case_dir / "input.yaml").write_text("task: go\n")
    for step, script in scripts.items():
        (case_dir / f"model_script.{step}.yaml").write_text(yaml.safe_dump(script, sort_keys=False))


ONE = [{"tool": "Write", "input": {"file_path": "out/one.txt", "content": "1"}}, {"text": "ONE-DONE"}]
TWO = [{"text": "TWO-DONE"}]


def test_each_step_is_its_own_session_in_the_one_sandbox(eval_project, make_pipeline, backend, cli):
    _project(eval_project, {"one": ONE, "two": TWO})
    pipeline = make_pipeline()
    outcome = pipeline.run("c1")
    assert (outcome.end_reason, outcome.exit_code, outcome.result) == ("exited", 0, "TWO-DONE"), outcome.error
    assert len(backend.created) == 1 and [c.stdin for c in cli.calls] == [b"first go", b"second after ONE-DONE"]
    one, two = outcome.steps
    assert (one.result, two.result) == ("ONE-DONE", "TWO-DONE")
    assert one.session_id != two.session_id and one.integrity.checked and two.integrity.checked
    assert one.gateway.requests == 2 and two.gateway.requests == 1
    case_dir = pipeline.case_dir("c1")
    assert case_dir.step("two").prompt.read_text() == "second after ONE-DONE"
    assert json.loads(case_dir.step("one").result.read_text())["result"] == "ONE-DONE"
    events = json.loads(case_dir.events.read_text())
    assert [e["step"] for e in events if e["type"] == "assistant"] == ["one", "one", "two"]
    assert json.loads(case_dir.result.read_text())["steps"][1]["step_id"] == "two"


def test_a_sandbox_that_breaks_under_a_continue_step_stops_the_pipeline(eval_project, make_pipeline, cli):
    _project(eval_project, {"one": ONE, "two": TWO})

    def broken(call: ExecCall) -> None:
        raise SandboxError("the daemon lost the container")

    cli.before = broken
    outcome = make_pipeline().run("c1")
    one, two = outcome.steps
    assert one.end_reason == "error" and one.error == "the daemon lost the container"
    assert two.ran is False and "sandbox failed in step one" in (two.skipped or "")
    assert outcome.end_reason == "error" and len(cli.calls) == 1


def test_an_interrupt_during_a_step_leaves_the_rest_unstarted(eval_project, make_pipeline, cli):
    _project(eval_project, {"one": ONE, "two": TWO})
    pipeline = make_pipeline()
    cli.before = lambda call: pipeline.ctx.cancelled.set() if is_agent(call) else None
    outcome = pipeline.run("c1")
    one, two = outcome.steps
    assert one.ran is True and two.ran is False and two.skipped == "the run was interrupted"
    assert outcome.end_reason == "interrupted" and len(cli.calls) == 1


def test_a_steps_own_cap_is_enforced_by_the_cases_channel(eval_project, make_pipeline, cli):
    _project(eval_project, {"one": [{"text": "ONE-DONE"}], "two": TWO})
    text = (eval_project.root / "eval.yaml").read_text().replace(
        'prompt: "second after {{ steps.one.output }}"}', 'prompt: "second", max_budget_usd: 0}')
    (eval_project.root / "eval.yaml").write_text(text)
    outcome = make_pipeline().run("c1")
    one, two = outcome.steps
    assert one.result == "ONE-DONE" and two.budget_usd == 0
    assert two.gateway.refused == 1 and two.end_reason == "budget_exhausted", two
    assert outcome.end_reason == "budget_exhausted"


def test_a_pipeline_interrupted_while_its_files_are_collected_ends_interrupted(eval_project, make_pipeline, backend,
                                                                                cli, monkeypatch):
    _project(eval_project, {"one": ONE, "two": TWO})
    cli.before = lambda call: [call.write(f"many/f{i}.txt", f"{i}\n") for i in range(20)] if is_agent(call) else None
    pipeline = make_pipeline()
    pipeline.interrupt_after_collecting(monkeypatch, 3)
    outcome = pipeline.run("c1")

    assert [step.ran for step in outcome.steps] == [True, True]
    assert outcome.end_reason == "interrupted", outcome
    assert outcome.error.startswith("collecting the case's files stopped after copying 3 of ")
    assert json.loads(pipeline.case_dir("c1").result.read_text())["error"] == outcome.error
    assert backend.live == []
