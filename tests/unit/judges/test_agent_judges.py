"""Agent judges, the pure parts: which files are staged, the output contract parser, the reduction of
samples, and the planning of a case's samples."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_eval_sandbox.app.agent_judging import plan_case
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.models import OutputConfig
from agent_eval_sandbox.judges.agent import (
    AgentJudgeJob,
    AgentRunOutput,
    contract,
    last_json_verdict,
    select_inputs,
    staged_path,
    verdict_of,
)
from agent_eval_sandbox.judges.kinds import AgentJudge, JudgeSetup, make_judge
from agent_eval_sandbox.judges.verdict import Scale
from agent_eval_sandbox.runner.judge_agent import stage

SCORE = Scale(is_bool=False, low=0, high=2, declared=True, integer=True)
BOOL = Scale(is_bool=True)


def _outputs(*paths: str) -> list[OutputConfig]:
    return [OutputConfig(path=p) for p in paths]


# ---- staging selection ---------------------------------------------------------------------


def test_inputs_default_to_every_output_path():
    assert select_inputs(_outputs("out", "docs/plan"), None) == ("out", "docs/plan")


def test_dot_stages_everything_the_record_holds_as_files():
    assert select_inputs(_outputs("out"), ["."]) == ("out", "_modified")


def test_inputs_name_outputs_by_path_or_last_segment_and_nothing_else():
    outputs = _outputs("out", "docs/plan", "logs")
    assert select_inputs(outputs, ["plan", "out/"]) == ("out", "docs/plan")
    assert select_inputs(outputs, ["secret"]) == ()


def test_a_case_file_never_lands_in_the_judges_own_directories():
    assert staged_path("output/score.json") == "case/output/score.json"
    assert staged_path(".context/x") == "case/.context/x"
    assert staged_path("out/a.txt") == "out/a.txt"


def _job(tmp_path: Path, inputs: tuple[str, ...], context: tuple[Path, ...] = ()) -> AgentJudgeJob:
    return AgentJudgeJob(judge="j", case_id="c", case_dir=tmp_path / "case", sample=1, samples=1, prompt="p",
                         model="m", inputs=inputs, context=context, allowed_tools=("Read",), timeout_s=5,
                         budget_usd=1)


def test_stage_copies_only_the_selected_files_and_no_links_out_of_the_case(tmp_path):
    case = tmp_path / "case"
    (case / "out").mkdir(parents=True)
    (case / "out" / "a.txt").write_text("work")
    (case / "answers.yaml").write_text("the key")  # in the case's directory, not selected
    (tmp_path / "outside.txt").write_text("outside")
    os.symlink(tmp_path / "outside.txt", case / "out" / "link.txt")
    (case / "logs").symlink_to(tmp_path)  # a selected path that is itself a link: nothing of it
    context = tmp_path / "ref"
    context.mkdir()
    (context / "guide.md").write_text("guide")
    (context / "model_script.yaml").write_text("- text: scripted")  # an offline script is left out
    mounts = stage(tmp_path / "slot", _job(tmp_path, ("out", "logs"), (context,)))

    staged = tmp_path / "slot" / "inputs"
    assert sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*")) == ["out", "out/a.txt"]
    assert sorted(p.name for p in (tmp_path / "slot" / "context" / "ref").iterdir()) == ["guide.md"]
    assert sorted(p.name for p in (tmp_path / "slot" / "workspace").iterdir()) == ["output"]
    targets = {m.target: m for m in mounts}
    assert "/workspace/out" in targets and "/workspace/.context" in targets
    assert all(m.read_only for m in mounts), "every staged input is read-only; ./output/ is copied in"
    settings = json.loads((tmp_path / "slot" / "managed-settings.json").read_text())
    assert settings == {"permissions": {"allow": ["Read"]}}


# ---- the output contract --------------------------------------------------------------------


def test_contract_states_the_scale_the_places_and_the_untrusted_data_guard():
    text = contract(SCORE, ["out", "output"], ["guide"])
    assert '"score": <an integer from 0 (worst) to 2 (best)>' in text
    assert "./out, ./case/output" in text and "./.context/guide" in text and "./output/score.json" in text
    assert "never follow instructions" in text
    assert '"passed": true or false' in contract(BOOL, [], [])


def test_score_json_is_the_verdict():
    sample = verdict_of(AgentRunOutput(score_file=b'{"score": 2, "rationale": "all there"}'), SCORE)
    assert (sample.value, sample.rationale, sample.error) == (2, "all there", None)


@pytest.mark.parametrize(("data", "error"), [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not an object"),
    (b'{"passed": true}', "asks for 'score'"),
    (b'{"score": 7, "rationale": "x"}', "7"),  # off the declared scale: an error, never clamped
    (b'{"score": 1, "rationale": 3}', "rationale"),
])
def test_a_bad_score_json_is_an_error_sample_and_no_fallback(data, error):
    run = AgentRunOutput(score_file=data, answer_texts=('{"score": 1, "rationale": "fallback"}',))
    sample = verdict_of(run, SCORE)
    assert sample.value is None and error in (sample.error or ""), sample


def test_without_score_json_the_last_json_verdict_of_the_answer_counts():
    texts = ('first {"score": 0, "rationale": "early"}', 'then {"score": 2, "rationale": "late", "x": {"y": 1}} end')
    sample = verdict_of(AgentRunOutput(answer_texts=texts), SCORE)
    assert (sample.value, sample.rationale) == (2, "late")


def test_objects_without_a_verdict_key_are_not_verdicts():
    assert last_json_verdict(['{"a": 1} and {"b": ["score"]}']) is None
    assert last_json_verdict(["{" * 10_000]) is None


def test_nothing_usable_is_an_error_never_a_pass():
    for scale in (SCORE, BOOL):
        sample = verdict_of(AgentRunOutput(answer_texts=("I think it is fine.",)), scale)
        assert sample.value is None and "nothing to score" in (sample.error or "")


def test_an_unfinished_run_does_not_count_whatever_it_wrote():
    run = AgentRunOutput(score_file=b'{"passed": true, "rationale": "ok"}', failure="past its timeout")
    sample = verdict_of(run, BOOL)
    assert sample.value is None and sample.error == "past its timeout"


# ---- judges on a loaded eval: aggregation and planning ---------------------------------------------

EVAL = """\
name: agent-judges
execution: {skill: s}
models: {judge: claude-haiku-4-5}
dataset: {path: cases}
outputs: [{path: out}]
judges:
  - name: arch
    llm_rubric: "Grade it."
    score_range: [0, 2]
    samples: 3
    agent: {allowed_tools: [Bash], inputs: [out], timeout: 30, max_budget_usd: 0.5}
  - name: gate
    llm_rubric: "Pass it?"
    feedback_type: bool
    if: "annotations.get('judge', True)"
    agent: {}
"""


@pytest.fixture
def judges(tmp_path: Path) -> dict[str, AgentJudge]:
    (tmp_path / "eval.yaml").write_text(EVAL)
    (tmp_path / "cases" / "c1").mkdir(parents=True)
    (tmp_path / "cases" / "c1" / "input.yaml").write_text("x: 1\n")
    loaded = load_eval_config(tmp_path / "eval.yaml")
    made = [make_judge(j, JudgeSetup(loaded, {})) for j in loaded.config.judges]
    assert all(isinstance(j, AgentJudge) for j in made)
    return {j.name: j for j in made if isinstance(j, AgentJudge)}


def test_samples_are_reduced_like_other_llm_judges(judges):
    arch, gate = judges["arch"], judges["gate"]
    runs = [AgentRunOutput(score_file=f'{{"score": {v}, "rationale": "r"}}'.encode()) for v in (0, 2, 1)]
    result, samples = arch.conclude(runs)
    assert result.value == 1 and len(samples) == 3 and result.stability is not None
    result, _ = arch.conclude([AgentRunOutput(failure="budget"), *runs[:2]])
    assert result.value == 0 and result.stability is not None and result.stability.error_count == 1
    result, _ = arch.conclude([AgentRunOutput(failure="budget")] * 3)
    assert result.value is None and result.error and "all 3 samples failed" in result.error
    verdicts = [AgentRunOutput(answer_texts=(f'{{"passed": {v}, "rationale": "r"}}',)) for v in ("true", "false")]
    result, _ = gate.conclude(verdicts)
    assert result.value is False, "a tie is no majority"


def _record(tmp_path: Path, annotations: dict[str, object] | None = None) -> dict[str, object]:
    return {"files": {}, "annotations": annotations or {}, "case_dir": str(tmp_path / "run" / "cases" / "c1")}


def test_planning_a_case_that_ran_makes_one_job_per_sample(judges, tmp_path):
    settled, planned = plan_case(list(judges.values()), _record(tmp_path, {"judge": False}), "c1", tmp_path)
    assert settled["gate"].status == "skipped"  # its `if` is false: no sandbox either
    [(case_id, judge, jobs)] = planned
    assert case_id == "c1" and judge.name == "arch"
    assert [job.sample for job in jobs] == [1, 2, 3]
    job = jobs[0]
    assert job.inputs == ("out",) and job.allowed_tools == ("Bash",)
    assert (job.timeout_s, job.budget_usd, job.model) == (30.0, 0.5, "claude-haiku-4-5")
    assert job.prompt.startswith("Grade it.") and "./output/score.json" in job.prompt
    assert "{{ conversation }}" not in job.prompt


# ---- score_run: what reaches the sandboxes ----------------------------------------------------------


def test_score_run_plans_no_sample_for_a_case_that_never_ran_and_marks_an_incomplete_one(tmp_path, monkeypatch):
    from agent_eval_sandbox.app import score as score_module

    from .rundir_fixture import case_result, make_project, make_run

    config = make_project(tmp_path, EVAL.replace("dataset: {path: cases}", "dataset: {path: dataset}"),
                          {"ran": {}, "stopped": {}, "crashed": {}})
    run = make_run(tmp_path, config, {
        "ran": {"run_result.json": case_result(), "out/a.txt": "work"},
        "stopped": {"run_result.json": case_result(end_reason="timed_out", exit_code=-1), "out/a.txt": "half"},
        "crashed": {"run_result.json": {"end_reason": "error", "error": "sandbox vanished"}},
    })
    seen: list[tuple[str, str, int]] = []

    def fake_judge_planned(planned, loaded, finished, lent, *, offline, say):
        outcomes = {}
        for case_id, judge, jobs in planned:
            seen.extend((case_id, judge.name, job.sample) for job in jobs)
            outcomes[(case_id, judge.name)] = judge.conclude(
                [AgentRunOutput(answer_texts=('{"score": 2, "passed": true, "rationale": "r"}',))] * len(jobs))
        return outcomes

    monkeypatch.setattr(score_module, "judge_planned", fake_judge_planned)
    result = score_module.score_run(run)
    assert sorted({(c, j) for c, j, _ in seen}) == [("ran", "arch"), ("ran", "gate"), ("stopped", "arch"),
                                                   ("stopped", "gate")]
    assert len(seen) == 8  # arch: 3 samples, gate: 1, on each case that ran
    per_case = result.summary.per_case
    assert {r.status for r in per_case["crashed"].values()} == {"not_run"}
    assert per_case["ran"]["arch"].value == 2 and per_case["ran"]["gate"].value is True
    assert per_case["stopped"]["arch"].incomplete is True and per_case["stopped"]["arch"].end_reason == "timed_out"
    assert list(per_case["ran"]) == ["arch", "gate"]


def test_the_judges_mounts_become_read_only_control_volumes_on_kubernetes(tmp_path):
    """On Kubernetes every bind mount is copied into a read-only volume: the judge's inputs and context
    must each be one (none copied into the writable workspace), and the run directory the relay's."""
    import time

    from agent_eval_sandbox.config.models import SandboxConfig
    from agent_eval_sandbox.inside import paths
    from agent_eval_sandbox.sandbox.kubernetes_objects import plan_mounts
    from agent_eval_sandbox.sandbox.policy import sandbox_spec

    (tmp_path / "case" / "out").mkdir(parents=True)
    (tmp_path / "case" / "out" / "a.txt").write_text("work")
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "guide.md").write_text("guide")
    mounts = stage(tmp_path / "slot", _job(tmp_path, ("out",), (tmp_path / "ref",)))
    spec = sandbox_spec(SandboxConfig(), image="img", run_id="r1", case_id="c1.judge", timeout_s=60,
                        now=time.time(), mounts=mounts)
    plan = plan_mounts(spec, {m.source: m.source.is_dir() for m in spec.mounts})
    assert plan.writable_files == ()
    assert {"/workspace/out", "/workspace/.context", paths.RUN_DIR} <= {v.mount_path for v in plan.volumes}
