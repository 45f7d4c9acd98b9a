"""Record a live run, replay it offline: the real CLI in the real sandbox, both times.

The "live" model is a stand-in of the tests' own (tests/standin_upstream.py):
it answers from a fresh random seed, with random ids and random stream
chunking, and it is gone when the run is replayed — so whatever the replay
reproduces came from the cassettes the gateway recorded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_eval_sandbox.gateway.cassette import load_cassette
from agent_eval_sandbox.gateway.normalise import normalise_request
from tests.integration.e2e.conftest import EvalProject, RunResult
from tests.standin_upstream import StandinUpstream

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"
CASES = ("alpha", "beta")
KEY = "sk-ant-replay-test-" + "Zq8v" * 6
# What differs between two runs of the same conversation, whatever the model said.
VOLATILE_EVENT_KEYS = ("timestamp", "session_id", "duration_ms", "duration_api_ms", "uuid")


def _write_project(project: EvalProject) -> None:
    project.eval_yaml("""
        name: e2e-replay
        execution: {skill: scribe, arguments: "{task}", timeout: 180, max_budget_usd: 5}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
        outputs: [{path: out}]
        judges:
          - name: wrote_out
            check: |
              files = outputs.get("files") or {}
              return any(name.startswith("out/") for name in files), f"files={sorted(files)}"
          - name: said_finished
            check: |
              return "Finished" in (outputs.get("conversation") or ""), "the final text"
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    for case_id in CASES:
        project.case(case_id, {"task": f"make notes about {case_id}"})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalProject, RunResult, StandinUpstream]:
    """One live run of two cases against the stand-in (which overloads once), recorded."""
    project = EvalProject(tmp_path_factory.mktemp("replay") / "project")
    _write_project(project)
    with StandinUpstream(overload_turn=1) as upstream:
        result = project.run("--record", "--run-id", "live",
                             env={"ANTHROPIC_BASE_URL": upstream.url, "ANTHROPIC_API_KEY": KEY})
    assert result.process.returncode == 0, result.process.stderr
    assert result.run_dir is not None
    for case_id in CASES:
        assert result.case_result(case_id)["end_reason"] == "exited", result.case_result(case_id)
    return project, result, upstream


def _events(run: RunResult, case_id: str) -> list[dict[str, Any]]:
    """events.json without what differs between runs; tool results of one turn in a fixed order
    (the CLI runs a turn's calls at once and reports them as they finish)."""
    events = [{k: v for k, v in e.items() if k not in VOLATILE_EVENT_KEYS} for e in run.events(case_id)]
    ordered: list[dict[str, Any]] = []
    for event in events:
        if ordered and event["type"] == "tool_result" and ordered[-1]["type"] == "tool_result":
            run_start = len(ordered)
            while run_start > 0 and ordered[run_start - 1]["type"] == "tool_result":
                run_start -= 1
            ordered[run_start:] = sorted([*ordered[run_start:], event], key=lambda e: e["tool_use_id"])
        else:
            ordered.append(event)
    return ordered


def _files(case_dir: Path) -> dict[str, bytes]:
    return {p.relative_to(case_dir).as_posix(): p.read_bytes()
            for sub in ("out", "_modified") for p in sorted((case_dir / sub).rglob("*")) if p.is_file()}


def _verdicts(run: RunResult) -> dict[str, Any]:
    summary = yaml.safe_load((run.run_dir / "summary.yaml").read_text())
    return {case: {judge: (r["value"], r["status"]) for judge, r in judges.items()}
            for case, judges in summary["per_case"].items()}


def test_a_recorded_live_run_replays_offline_with_the_same_transcripts_files_and_verdicts(recorded):
    project, live, upstream = recorded
    replay = project.run("--replay", str(live.run_dir), "--run-id", "replayed")
    assert replay.process.returncode == 0, replay.process.stderr
    # the stand-in was gone: nothing reached it after the live run
    assert len(upstream.sent) == sum(len(load_cassette(live.case(c) / "cassette.jsonl").entries) for c in CASES)
    assert any(sent.status == 529 for sent in upstream.sent)  # a recorded retry, replayed in order
    for case_id in CASES:
        was, now = live.case_result(case_id), replay.case_result(case_id)
        assert now["end_reason"] == "exited" and now["exit_code"] == 0, now
        assert _events(replay, case_id) == _events(live, case_id)
        assert _files(replay.case(case_id)) == _files(live.case(case_id)) != {}
        diff = (replay.case(case_id) / "workspace.diff").read_text()
        assert diff == (live.case(case_id) / "workspace.diff").read_text()
        for key in ("num_turns", "result", "token_usage", "cost_usd", "changes"):
            assert now[key] == was[key], key
        assert now["integrity"]["dropped"] == 0 and now["gateway"]["requests"] == was["gateway"]["requests"]
        assert not (replay.case(case_id) / "replay_diff.txt").exists()
    assert _verdicts(replay) == _verdicts(live)
    assert _verdicts(live) == {c: {"wrote_out": (True, "scored"), "said_finished": (True, "scored")} for c in CASES}
    meta = json.loads((replay.run_dir / "run.json").read_text())
    assert meta["replay_of"] == str(live.run_dir.resolve()) and meta["offline"] is True


def test_no_file_of_a_recorded_run_holds_the_key_and_no_cassette_the_placeholder(recorded):
    _, live, upstream = recorded
    # the stand-in got the real key on every request: the gateway put it there
    assert upstream.sent and all(s.headers.get("x-api-key") == KEY for s in upstream.sent)
    files = [p for p in live.run_dir.rglob("*") if p.is_file()]
    assert any(p.name == "cassette.jsonl" for p in files)
    for path in files:
        assert "Zq8v" not in path.read_text(errors="replace"), path
    for case_id in CASES:
        # the agent printed the placeholder key, and sent it back to the model in its next request...
        assert any("sk-ant-agent-eval-sandbox-placeholder" in r for r in live.tool_results(case_id))
        text = (live.case(case_id) / "cassette.jsonl").read_text()
        # ...which the cassette keeps as [redacted], as it keeps no auth header
        assert "sk-ant-agent-eval-sandbox-placeholder" not in text and "x-api-key" not in text.lower()
        assert "wrote" in text and "[redacted]" in text


def test_the_cassette_holds_the_streams_as_the_upstream_sent_them(recorded):
    _, live, upstream = recorded
    sent = {s.raw for s in upstream.sent if s.status == 200}
    recorded_bodies = [e.response.body_bytes() for c in CASES
                       for e in load_cassette(live.case(c) / "cassette.jsonl").entries if e.response]
    streams = [b for b in recorded_bodies if b.startswith(b"event: message_start")]
    assert streams and all(body in sent for body in streams)
    assert any(e.response.status == 529 for c in CASES for e in load_cassette(live.case(c) / "cassette.jsonl").entries
               if e.response)


def test_a_changed_skill_ends_the_replay_with_replay_mismatch_and_the_diff(recorded, tmp_path):
    project, live, _ = recorded
    drifted = EvalProject(tmp_path / "drifted")
    shutil.copytree(project.root, drifted.root, ignore=shutil.ignore_patterns("runs"))
    drifted.write(".claude/skills/scribe/SKILL.md", SKILL.replace("Do what the arguments say.",
                                                                  "Do what the arguments say, in French."))
    started = time.monotonic()
    replay = drifted.run("--replay", str(live.run_dir))
    assert time.monotonic() - started < 300  # it ends, it does not hang
    # no threshold is set: the run fails for the drift itself
    assert replay.process.returncode == 1, replay.process.stderr
    assert ("REPLAY MISMATCH: 2 case(s) asked for what their cassette does not hold: alpha, beta"
            in replay.process.stderr)
    for case_id in CASES:
        outcome = replay.case_result(case_id)
        assert outcome["end_reason"] == "replay_mismatch", outcome
        assert "replay mismatch: request 1 of the replay" in outcome["error"] and "replay_diff.txt" in outcome["error"]
        assert "in French." in outcome["error"]
        diff = (replay.case(case_id) / "replay_diff.txt").read_text()
        assert "-" in diff and any(line.startswith("+") and "in French." in line for line in diff.splitlines())
        assert any(line.startswith("-") and line.endswith("Do what the arguments say.") for line in diff.splitlines())
        assert "ERROR: replay mismatch" in (replay.case(case_id) / "stderr.log").read_text()
        assert not (replay.case(case_id) / "out").exists()  # the agent got no answer to act on
    verdicts = _verdicts(replay)
    assert all(v["wrote_out"][0] is False for v in verdicts.values())


def test_a_cassette_made_a_model_script_reruns_the_case_offline(recorded, tmp_path):
    project, live, _ = recorded
    offline = EvalProject(tmp_path / "offline")
    shutil.copytree(project.root, offline.root, ignore=shutil.ignore_patterns("runs"))
    for case_id in CASES:
        script = offline.root / "cases" / case_id / "model_script.yaml"
        made = subprocess.run([sys.executable, "-m", "agent_eval_sandbox", "cassette", "to-script",
                               str(live.case(case_id)), "-o", str(script)], capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
    rerun = offline.run("--offline")
    assert rerun.process.returncode == 0, rerun.process.stderr
    for case_id in CASES:
        now, was = rerun.case_result(case_id), live.case_result(case_id)
        assert now["end_reason"] == "exited" and now["result"] == was["result"]
        assert now["token_usage"] == was["token_usage"]
        assert _files(rerun.case(case_id)) == _files(live.case(case_id))
    assert _verdicts(rerun) == _verdicts(live)


def test_a_run_whose_subagent_runs_beside_the_main_agent_replays(project):
    """The main agent starts a background subagent; their requests interleave, and each finds its own
    exchange in the cassette (recorded here from a scripted model, served per request)."""
    project.eval_yaml("""
        name: e2e-replay-subagent
        execution: {prompt: "{q}", timeout: 180}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
    """)
    project.case("c1", {"q": "delegate"})
    # Which thread gets the Bash call is a race, decided once, when recording. Whoever gets it sleeps, so the other
    # has long finished by the time it asks again, and the background agent's notification lands at the same point
    # of the main agent's conversation in both runs. (Without the sleep it lands where the CLI's timing puts it, and
    # a replay can mismatch: test_gateway_replay_match names that case.)
    project.write("cases/c1/model_script.yaml", yaml.safe_dump({"advance": "per_request", "steps": [
        {"tool": "Task", "input": {"description": "look around", "prompt": "list the files",
                                   "subagent_type": "general-purpose"}},
        {"tool": "Bash", "input": {"command": "sleep 2; echo from-a-thread"}},
        {"text": "one thread done"},
        {"text": "all done"},
    ]}))
    live = project.run("--offline", "--record", "--run-id", "live")
    assert live.process.returncode == 0, live.process.stderr
    entries = load_cassette(live.case("c1") / "cassette.jsonl").entries
    billing = {json.dumps(e.request["system"][0]) for e in entries}
    assert len(billing) == 2  # the main agent's requests and the subagent's
    (project.root / "cases" / "c1" / "model_script.yaml").unlink()
    replay = project.run("--replay", str(live.run_dir), "--run-id", "replayed")
    assert replay.process.returncode == 0, replay.process.stderr
    now, was = replay.case_result("c1"), live.case_result("c1")
    assert now["end_reason"] == "exited", now
    assert (now["result"], now["num_turns"], now["token_usage"]) == (was["result"], was["num_turns"],
                                                                      was["token_usage"])
    # the same events, but for the background agent's id and the session's (new in every run), their order
    # and the last digits of the CLI's cost (its sum of the two threads' costs, in the order they came)
    def events(run: RunResult) -> list[str]:
        return sorted(json.dumps({k: round(v, 9) if isinstance(v, float) else v for k, v in e.items()},
                                 sort_keys=True) for e in normalise_request(_events(run, "c1")))

    assert events(replay) == events(live)
    assert any("agentId: <agent#1>" in e for e in events(live))
