"""`run --record/--replay` input errors and `cassette to-script`, as a user meets them (no Docker)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from agent_eval_sandbox.gateway.cassette import CassetteRecorder
from agent_eval_sandbox.gateway.script import parse_script

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart" / "eval.yaml"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_eval_sandbox", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    return line


def _cassette(path: Path) -> Path:
    recorder = CassetteRecorder(path, "c1")
    tape = recorder.begin("POST", "/v1/messages", [], {"model": "m", "messages": [{"role": "user", "content": "go"}]})
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
               "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 3, "output_tokens": 1}}
    tape.respond(200, [("content-type", "application/json")], json.dumps(message).encode())
    tape.finish("forwarded")
    recorder.close()
    return path


def test_offline_and_replay_are_exclusive(tmp_path):
    line = _one_error_line(cli("run", str(QUICKSTART), "--offline", "--replay", str(tmp_path)))
    assert "--offline and --replay are exclusive" in line


def test_replaying_what_is_not_a_run_or_has_no_cassettes_stops_before_anything_runs(tmp_path):
    project = tmp_path / "qs"
    shutil.copytree(QUICKSTART.parent, project)
    runs = ["--runs-dir", str(tmp_path / "runs")]
    assert "no such run directory" in _one_error_line(
        cli("run", str(project / "eval.yaml"), "--replay", str(tmp_path / "nowhere"), *runs))
    recorded = tmp_path / "recorded"
    (recorded / "cases").mkdir(parents=True)
    (recorded / "run.json").write_text("{}")
    line = _one_error_line(cli("run", str(project / "eval.yaml"), "--replay", str(recorded), *runs))
    assert f"--replay {recorded}: no cassette for" in line and "run --record" in line
    assert not (tmp_path / "runs").exists()  # no run directory was made


def test_to_script_writes_a_script_from_a_cassette_or_a_case_directory(tmp_path):
    path = _cassette(tmp_path / "cases" / "c1" / "cassette.jsonl")
    printed = cli("cassette", "to-script", str(path))
    assert printed.returncode == 0, printed.stderr
    script = parse_script(yaml.safe_load(printed.stdout))
    assert [s.text for s in script.steps] == ["done"] and script.steps[0].usage.input_tokens == 3
    out = tmp_path / "model_script.yaml"
    written = cli("cassette", "to-script", str(path.parent), "-o", str(out), "--advance", "per_request")
    assert written.returncode == 0 and f"wrote {out}" in written.stderr
    assert out.read_text() == printed.stdout.replace("advance: per_turn", "advance: per_request").replace(
        "one conversation, one request per turn: the step is picked by the turns in the request.",
        "steps are served in the order requests arrive (subagents, side requests or retries were recorded).")


def test_to_script_on_a_damaged_cassette_is_one_line_naming_the_file_and_line(tmp_path):
    path = _cassette(tmp_path / "cassette.jsonl")
    path.write_text(path.read_text() + "{not json\n")
    line = _one_error_line(cli("cassette", "to-script", str(path)))
    assert f"{path}:4: not a JSON line" in line
    assert "cannot read the cassette" in _one_error_line(cli("cassette", "to-script", str(tmp_path / "none.jsonl")))
