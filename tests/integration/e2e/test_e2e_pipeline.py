"""A three-step pipeline (create → refine → review) end to end: real CLI, real sandbox, scripted model, offline.

One run, three cases that differ only in their scripts:

- `happy`: every step succeeds; refine's prompt carries `{{ steps.create.output }}`,
  `.files` and `.exit_code`; the steps share the workspace; step env over execution env;
  before_step (container) and after_step (host) hooks see STEP_ID/STEP_INDEX;
- `refine-fails`: refine (`on_failure: continue`) fails and review still runs;
- `create-fails`: create (`on_failure: fail`) fails and the rest never run: their
  step judges are `not_run`, never a pass.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

pytestmark = pytest.mark.docker

EVAL = """
name: e2e-pipeline
models: {skill: claude-sonnet-4-6}
runner: {permission_mode: bypassPermissions}
dataset: {path: cases}
outputs: [{path: out}]
execution:
  timeout: 300
  parallelism: 2
  env: {SHARED: from-execution, KEPT: kept}
  steps:
    - id: create
      prompt: "Create a draft about {{ input.topic }}"
      env: {SHARED: from-create}
    - id: refine
      prompt: >-
        Refine this: {{ steps.create.output }} (files: {{ steps.create.files | join(',') }},
        exit {{ steps.create.exit_code }})
      on_failure: continue
    - id: review
      prompt: "Review out/final.md"
hooks:
  before_step:
    - {description: mark, scope: container, command: 'mkdir -p out && echo "$STEP_ID $STEP_INDEX" >> out/hook-steps.txt'}
  after_step:
    - {description: note, command: 'echo "$CASE_ID $STEP_ID $STEP_INDEX" >> "$AGENT_EVAL_PROJECT_ROOT/after-steps.txt"'}
judges:
  - name: whole_case_sees_every_step
    check: |
      names = [c["name"] for c in outputs["tool_calls"]]
      return names == ["Write", "Bash", "Bash", "Read"], ",".join(names)
  - name: create_alone
    step: create
    check: |
      names = [c["name"] for c in outputs["tool_calls"]]
      text = outputs["conversation"]
      ok = names == ["Write", "Bash"] and "DRAFT-READY" in text and "REVIEWED" not in text
      return ok and outputs["exit_code"] == 0, ",".join(names)
  - name: review_alone
    step: review
    check: |
      names = [c["name"] for c in outputs["tool_calls"]]
      ok = names == ["Read"] and "REVIEWED" in outputs["conversation"] and "DRAFT-READY" not in outputs["conversation"]
      return ok and "out/final.md" in outputs["files"], ",".join(names)
"""

CREATE = [
    {"tool": "Write", "input": {"file_path": "/workspace/out/draft.md", "content": "the draft\n"}},
    {"tool": "Bash", "input": {"command": 'echo "$SHARED $KEPT" > out/env-create.txt'}},
    {"text": "DRAFT-READY at out/draft.md"},
]
REFINE = [
    {"tool": "Bash", "input": {"command": 'echo "$SHARED" > out/env-refine.txt && cat out/draft.md > out/final.md'}},
    {"text": "REFINED"},
]
REVIEW = [
    {"tool": "Read", "input": {"file_path": "/workspace/out/final.md"}},
    {"text": "REVIEWED: looks fine"},
]
FAIL = [{"error": {"status": 400, "message": "scripted failure of this step"}}]


def _case(project, case_id: str, scripts: dict[str, list]) -> None:
    files = {f"model_script.{step}.yaml": yaml.safe_dump(script, sort_keys=False) for step, script in scripts.items()}
    project.case(case_id, {"topic": "caching"}, files=files)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    from tests.integration.e2e.conftest import EvalProject

    project = EvalProject(tmp_path_factory.mktemp("pipeline") / "project")
    project.eval_yaml(EVAL)
    _case(project, "happy", {"create": CREATE, "refine": REFINE, "review": REVIEW})
    _case(project, "refine-fails", {"create": CREATE, "refine": FAIL, "review": REVIEW})
    _case(project, "create-fails", {"create": FAIL, "refine": REFINE, "review": REVIEW})
    result = project.run("--offline", "--run-id", "pipeline-run")
    assert result.run_dir is not None, result.process.stderr[-3000:]
    assert "Traceback" not in result.process.stderr, result.process.stderr[-3000:]
    summary = json.loads((result.run_dir / "summary.json").read_text())
    return project, result, summary


def _steps(result, case_id: str) -> dict:
    return {step["step_id"]: step for step in result.case_result(case_id)["steps"]}


def test_every_step_runs_in_the_same_workspace_and_later_steps_see_earlier_ones(pipeline_run):
    project, result, summary = pipeline_run
    entry = result.case_result("happy")
    assert (entry["end_reason"], entry["exit_code"]) == ("exited", 0), entry
    steps = _steps(result, "happy")
    assert [s["step_id"] for s in entry["steps"]] == ["create", "refine", "review"]
    for step in steps.values():
        assert (step["ran"], step["end_reason"], step["exit_code"]) == (True, "exited", 0), step
        assert step["integrity"]["checked"] is True and step["integrity"]["dropped"] == 0, step["integrity"]
    # {{ steps.create.output }}, .files (the step's own, not the hook's file) and .exit_code.
    refine_prompt = (result.case("happy") / "steps" / "refine" / "prompt.txt").read_text()
    assert refine_prompt == ("Refine this: DRAFT-READY at out/draft.md "
                             "(files: out/draft.md,out/env-create.txt, exit 0)"), refine_prompt
    # ... and it is what the step's CLI sent the model (each step is sent its own prompt).
    gateway_log = (result.case("happy") / "gateway.jsonl").read_text()
    assert refine_prompt in gateway_log and "Create a draft about caching" in gateway_log
    assert "Review out/final.md" in gateway_log
    assert steps["create"]["files"] == ["out/draft.md", "out/env-create.txt"]
    assert steps["refine"]["files"] == ["out/env-refine.txt", "out/final.md"]
    assert steps["create"]["result"] == "DRAFT-READY at out/draft.md" and entry["result"] == "REVIEWED: looks fine"
    # The shared workspace: refine read create's file, review read refine's.
    assert (result.case("happy") / "out" / "final.md").read_text() == "the draft\n"
    # A step's env over execution.env, each step its own.
    assert (result.case("happy") / "out" / "env-create.txt").read_text() == "from-create kept\n"
    assert (result.case("happy") / "out" / "env-refine.txt").read_text() == "from-execution\n"
    # before_step ran in the sandbox, after_step on the host, each with STEP_ID and STEP_INDEX.
    assert (result.case("happy") / "out" / "hook-steps.txt").read_text() == "create 0\nrefine 1\nreview 2\n"
    notes = (project.root / "after-steps.txt").read_text().splitlines()
    assert [n for n in notes if n.startswith("happy ")] == ["happy create 0", "happy refine 1", "happy review 2"]
    # Each step's own files, and the case's events are the steps' in order.
    for step_id in ("create", "refine", "review"):
        own = result.case("happy") / "steps" / step_id
        assert {"prompt.txt", "stdout.log", "stderr.log", "events.json", "run_result.json"} <= {
            p.name for p in own.iterdir()}
    events = result.events("happy")
    assert [e["step"] for e in events if e["type"] == "assistant"] == ["create"] * 3 + ["refine"] * 2 + ["review"] * 2
    run_result = json.loads((result.run_dir / "run_result.json").read_text())
    assert [s["step_id"] for s in run_result["per_case"]["happy"]["steps"]] == ["create", "refine", "review"]
    # Step-scoped judges saw their step's trace; the whole-case judge every step's.
    per_case = summary["per_case"]["happy"]
    for judge in ("whole_case_sees_every_step", "create_alone", "review_alone"):
        assert per_case[judge]["value"] is True, (judge, per_case[judge])


def test_a_failing_step_with_on_failure_continue_lets_the_rest_run(pipeline_run):
    _, result, summary = pipeline_run
    steps = _steps(result, "refine-fails")
    assert steps["refine"]["ran"] is True and steps["refine"]["exit_code"] not in (0, None), steps["refine"]
    assert steps["review"]["ran"] is True and steps["review"]["exit_code"] == 0, steps["review"]
    entry = result.case_result("refine-fails")
    # Tolerated by design: the case ended as its `fail` steps did.
    assert (entry["end_reason"], entry["exit_code"]) == ("exited", 0), entry
    per_case = summary["per_case"]["refine-fails"]
    # review ran and is judged on its own trace: its Read found no out/final.md (refine never wrote it).
    review = per_case["review_alone"]
    assert (review["status"], review["value"], review["rationale"]) == ("scored", False, "Read"), review
    assert per_case["create_alone"]["value"] is True, per_case["create_alone"]
    assert per_case["whole_case_sees_every_step"]["value"] is False  # refine made no calls


def test_a_failing_step_with_on_failure_fail_stops_the_rest_and_their_judges_never_pass(pipeline_run):
    _, result, summary = pipeline_run
    steps = _steps(result, "create-fails")
    assert steps["create"]["ran"] is True and steps["create"]["exit_code"] not in (0, None), steps["create"]
    for step_id in ("refine", "review"):
        assert steps[step_id]["ran"] is False, steps[step_id]
        assert "on_failure is fail" in steps[step_id]["skipped"], steps[step_id]
        assert not (result.case("create-fails") / "steps" / step_id / "stdout.log").exists()
    entry = result.case_result("create-fails")
    assert entry["exit_code"] not in (0, None), entry
    per_case = summary["per_case"]["create-fails"]
    assert per_case["review_alone"]["status"] == "not_run", per_case["review_alone"]
    assert "step review did not run" in per_case["review_alone"]["rationale"]
    assert per_case["create_alone"]["value"] is False  # judged: its step ran, and failed


def _limits_project(project, steps: list[dict], **execution) -> None:
    project.eval_yaml(yaml.safe_dump({
        "name": "e2e-pipeline-limits",
        "models": {"skill": "claude-sonnet-4-6"},
        "runner": {"permission_mode": "bypassPermissions"},
        "dataset": {"path": "cases"},
        "execution": {**execution, "steps": steps},
    }, sort_keys=False))


SLEEP = [{"tool": "Bash", "input": {"command": "echo waiting && sleep 9999", "timeout": 600000}}, {"text": "woke up"}]
QUICK = [{"text": "quick"}]


def test_a_steps_own_deadline_stops_only_it_and_the_cases_deadline_stops_the_pipeline(project):
    _limits_project(project, [
        {"id": "quick", "prompt": "one"},
        {"id": "own-deadline", "prompt": "two", "timeout": 6, "on_failure": "continue"},
        {"id": "after", "prompt": "three"},
        {"id": "hang", "prompt": "four"},
        {"id": "never", "prompt": "five"},
    ], timeout=45)
    _case(project, "c1", {"quick": QUICK, "own-deadline": SLEEP, "after": QUICK, "hang": SLEEP, "never": QUICK})
    started = time.monotonic()
    result = project.run("--offline", "--run-id", "pipeline-deadline")
    elapsed = time.monotonic() - started
    assert result.run_dir is not None, result.process.stderr[-3000:]
    steps_by_id = _steps(result, "c1")
    own = steps_by_id["own-deadline"]
    assert own["end_reason"] == "timed_out" and own["timeout_s"] == 6 and own["agent_duration_s"] < 6 + 10, own
    assert steps_by_id["after"]["end_reason"] == "exited" and steps_by_id["after"]["result"] == "quick"
    hang = steps_by_id["hang"]
    # The rest of the case's 45 s, not the step's own (none: the case's).
    assert hang["end_reason"] == "timed_out" and hang["timeout_s"] < 45, hang
    assert steps_by_id["never"]["ran"] is False and steps_by_id["never"]["skipped"] == "the case's deadline passed"
    entry = result.case_result("c1")
    assert entry["end_reason"] == "timed_out" and "deadline" in entry["limits_hit"], entry
    assert elapsed < 45 + 60  # the case's deadline held for the pipeline as a whole (generous bound)


def test_a_budget_spent_in_one_step_stops_the_next(project):
    _limits_project(project, [
        {"id": "spend", "prompt": "one", "on_failure": "continue", "max_budget_usd": 5},
        {"id": "next", "prompt": "two"},
    ], max_budget_usd=0.5)
    # $3 per million input tokens: 200k tokens is $0.60, more than the case's $0.50.
    spend = [{"text": "spent it all", "usage": {"input_tokens": 200000, "output_tokens": 10}}]
    _case(project, "c1", {"spend": spend, "next": QUICK})
    result = project.run("--offline", "--run-id", "pipeline-budget")
    assert result.run_dir is not None, result.process.stderr[-3000:]
    steps_by_id = _steps(result, "c1")
    spent = steps_by_id["spend"]
    # Its own cap of $5 is bounded by the case's $0.50.
    assert spent["ran"] is True and spent["budget_usd"] == 0.5 and spent["gateway"]["spent_usd"] >= 0.5, spent
    nxt = steps_by_id["next"]
    assert nxt["ran"] is False and nxt["skipped"] == "the case's budget is spent", nxt
    entry = result.case_result("c1")
    assert entry["end_reason"] == "budget_exhausted" and "budget" in entry["limits_hit"], entry
    assert entry["gateway"]["spent_usd"] >= 0.5
