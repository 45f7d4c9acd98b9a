"""Record and replay through the case pipeline on the fake sandbox backend (the real gateway, the
replay server, collect): the replay's outcome is the recording's; drift ends in replay_mismatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.cassette import load_cassette
from agent_eval_sandbox.rundir.write import write_json
from agent_eval_sandbox.runner.model_access import OfflineModels, ReplayModels, model_access
from tests.unit.runner.pipeline_fixture import MODEL, write_tool_step

SCRIPT = [write_tool_step("out/hello.txt", "hi there"), {"text": "all written"}]


def _recording(loaded: LoadedConfig, settings: RunSettings) -> OfflineModels:
    return OfflineModels(loaded, record=True)


def _replaying(recorded: Path, version: str = "2.1.332"):
    def make(loaded: LoadedConfig, settings: RunSettings) -> ReplayModels:
        return ReplayModels(loaded, recorded, settings=settings, claude_version=version)

    return make


@pytest.fixture
def recorded(eval_project, make_pipeline):
    eval_project.eval_yaml()
    eval_project.case("c1", SCRIPT)
    pipeline = make_pipeline(models=_recording)
    outcome = pipeline.run("c1")
    assert outcome.end_reason == "exited" and outcome.result == "all written"
    write_json(pipeline.ctx.run_dir.run_json, {"claude_version": "2.1.332",
                                               "settings": {"model": MODEL, "max_budget_usd": 5.0}})
    return pipeline, outcome


def test_a_recorded_case_replays_to_the_same_outcome_without_its_script(eval_project, make_pipeline, recorded):
    pipeline, was = recorded
    cassette = load_cassette(pipeline.case_dir("c1").cassette)
    assert len(cassette.entries) == 2 and cassette.complete
    (eval_project.root / "cases" / "c1" / "model_script.yaml").write_text(
        yaml.safe_dump([{"text": "the script is not what a replay plays"}]))
    replay = make_pipeline(run_id="r2", models=_replaying(pipeline.ctx.run_dir.root))
    now = replay.run("c1")
    assert now.end_reason == "exited" and now.error is None
    for key in ("result", "num_turns", "token_usage", "cost_usd", "changes"):
        assert getattr(now, key) == getattr(was, key), key
    assert (replay.case_dir("c1").path / "out" / "hello.txt").read_text() == "hi there"
    assert not replay.case_dir("c1").replay_diff.exists() and not replay.case_dir("c1").cassette.exists()
    events = json.loads(replay.case_dir("c1").events.read_text())
    assert [e["type"] for e in events] == [e["type"] for e in json.loads(pipeline.case_dir("c1").events.read_text())]


def test_a_replay_that_drifts_ends_with_replay_mismatch_and_its_diff(eval_project, make_pipeline, recorded):
    pipeline, _ = recorded
    eval_project.case("c1", SCRIPT, task="go somewhere else")  # the prompt the agent gets changes
    replay = make_pipeline(run_id="r2", models=_replaying(pipeline.ctx.run_dir.root))
    now = replay.run("c1")
    assert now.end_reason == "replay_mismatch"
    assert now.error.startswith("replay mismatch: request 1 of the replay (POST /v1/messages)")
    assert now.error.endswith("(diff: replay_diff.txt)") and "go somewhere else" in now.error
    diff = replay.case_dir("c1").replay_diff.read_text()
    assert "+messages[0].content: /scribe go somewhere else" in diff and "-messages[0].content: /scribe go" in diff
    assert "ERROR: replay mismatch" in replay.case_dir("c1").stderr_log.read_text()
    written = json.loads(replay.case_dir("c1").result.read_text())
    assert written["end_reason"] == "replay_mismatch" and written["error"] == now.error
    assert not (replay.case_dir("c1").path / "out").exists()


def test_a_tool_that_answers_otherwise_is_a_mismatch_at_the_request_that_carries_it(eval_project, make_pipeline,
                                                                                    recorded, cli):
    pipeline, _ = recorded
    replay = make_pipeline(run_id="r2", models=_replaying(pipeline.ctx.run_dir.root))
    cli.tools = {}  # the agent no longer has Write: the next request carries an error, not the tool's output
    now = replay.run("c1")
    assert now.end_reason == "replay_mismatch" and "request 2 of the replay" in now.error


def test_replay_needs_every_case_s_cassette_and_warns_of_settings_that_change_requests(eval_project, make_pipeline,
                                                                                        recorded):
    pipeline, _ = recorded
    eval_project.case("c2", SCRIPT)
    replay = make_pipeline(run_id="r2", models=_replaying(pipeline.ctx.run_dir.root, version="2.1.400"))
    with pytest.raises(UserError, match=r"no cassette for c2 — replay a run recorded with `run --record`"):
        replay.ctx.models.warnings(replay.invocations)
    (warning,) = replay.ctx.models.warnings([replay.invocation("c1")])
    assert warning.startswith("--replay: claude_version is '2.1.400', the recorded run had '2.1.332'")


def test_the_factory_chooses_replay_over_offline_and_online(eval_project, make_pipeline, recorded):
    pipeline, _ = recorded
    loaded, settings = pipeline.ctx.loaded, pipeline.ctx.settings
    replaying = model_access(loaded, offline=True, replay=pipeline.ctx.run_dir.root, settings=settings,
                             claude_version="2.1.332", record=True)
    assert isinstance(replaying, ReplayModels) and replaying.offline and replaying.records
    assert not model_access(loaded, offline=True).records
    assert model_access(loaded, offline=False, environ={"ANTHROPIC_API_KEY": "k"}, record=True).records
