"""A later step of a pipeline passes an earlier step's answers off as its own.

The steps of a case share one sandbox, so a later step can read the earlier
step's session transcript in ~/.claude/projects: genuine model messages, the
earlier session's id, its final answer. Written into the later step's stream
(through `/proc/<pid>/fd/1`, which gVisor lets the same user open), they are
messages the model really sent, on the case's own gateway channel. Each step
is checked against the record of its own conversation alone
(`Channel.begin_step`): the earlier messages are dropped, and the forged final
`result` (the earlier answer, the earlier session) gives way to the step's own.
"""

from __future__ import annotations

import json

import pytest
import yaml

from .conftest import (
    AttackRun,
    bash,
    by_probe,
    final,
    is_gvisor,
    make_project,
    probe_steps,
    record_fact,
    run_attack,
    write_eval,
)

pytestmark = pytest.mark.docker

FIRST = "FIRST-STEP-ANSWER: the draft is done"
SECOND = "SECOND-STEP-ANSWER: reviewed"
NOT_FIRST = ('return (' + repr(FIRST[:17]) + ' not in outputs["conversation"] and '
             '[c["name"] for c in outputs["tool_calls"]] == ["Write", "Bash"], outputs["conversation"][-200:])')


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "replay-step", runtime)
    write_eval(project, f"""
        name: attack-replay-step
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        execution:
          timeout: 300
          steps:
            - {{id: first, prompt: "draft it"}}
            - {{id: second, prompt: "review {{{{ steps.first.output }}}}"}}
        judges:
          - name: second_is_its_own
            step: second
            check: |
              {NOT_FIRST}
    """, runtime)
    first = [bash("echo drafting"), final(FIRST)]
    second = [*probe_steps("replay_step", {"needle": FIRST, "delay_s": 120}), final(SECOND)]
    project.case("c1", {"q": "x"}, files={
        "model_script.first.yaml": yaml.safe_dump(first, sort_keys=False),
        "model_script.second.yaml": yaml.safe_dump(second, sort_keys=False),
    })
    return run_attack(project, runtime, "replay-step", "--offline")


def _steps(run: AttackRun) -> dict:
    return {s["step_id"]: s for s in run.entry("c1")["steps"]}


def _second_events(run: AttackRun) -> list[dict]:
    return json.loads((run.result.case("c1") / "steps" / "second" / "events.json").read_text())


def test_the_later_step_found_the_earlier_steps_session(replay_run: AttackRun) -> None:
    found = [r for r in by_probe("\n".join(c.output for c in replay_run.calls("c1")))["replay_step"]
             if r["kind"] == "transcript"]
    steps = _steps(replay_run)
    # The attack had what it needed: the earlier session's id and its genuine messages.
    assert found and found[0]["session"] == steps["first"]["session_id"] and found[0]["messages"] >= 2, found
    tried = [r for r in by_probe("\n".join(c.output for c in replay_run.calls("c1")))["replay_step"]
             if r["kind"] == "fd"]
    assert any("run_agent.py" in t["cmd"] for t in tried), tried
    if not is_gvisor(replay_run.runtime):
        assert not any(t["opened"] for t in tried), tried
    record_fact("replay-step: processes whose fd 1 the later step opened", replay_run.runtime,
                sum(t["opened"] for t in tried))


def test_no_earlier_answer_counts_as_the_later_steps(replay_run: AttackRun) -> None:
    steps = _steps(replay_run)
    second = steps["second"]
    assert (second["end_reason"], second["exit_code"]) == ("exited", 0), second
    assert second["result"] == SECOND, second
    assert second["session_id"] not in (None, steps["first"]["session_id"]), second
    assert second["num_turns"] != 1 or second["num_turns"] is None
    texts = [e.get("text") or "" for e in _second_events(replay_run) if e["type"] == "assistant"]
    assert not any(FIRST[:17] in t for t in texts), texts
    assert second["integrity"]["checked"] is True
    if is_gvisor(replay_run.runtime):
        reasons = " | ".join(f["reason"] for f in second["integrity"]["findings"])
        assert second["integrity"]["dropped"] >= 2 and "never sent by the model" in reasons, second["integrity"]
        assert "is not the session the gateway saw" in reasons, reasons
    record_fact("replay-step: earlier-step lines dropped from the later step", replay_run.runtime,
                second["integrity"]["dropped"])
    summary = json.loads((replay_run.result.run_dir / "summary.json").read_text())
    verdict = summary["per_case"]["c1"]["second_is_its_own"]
    assert verdict["value"] is True, verdict
    # The earlier step is untouched: its own answer, checked against its own record.
    assert steps["first"]["result"] == FIRST and steps["first"]["integrity"]["dropped"] == 0
