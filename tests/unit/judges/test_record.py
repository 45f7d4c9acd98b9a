"""The judges' `outputs` record, built from a hand-made run directory (docs/run-directory.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.models import OutputConfig, TracesConfig
from agent_eval_sandbox.judges.record import (
    CaseFiles,
    FileBytes,
    build_record,
    read_case_files,
)
from agent_eval_sandbox.rundir.read import open_finished_run
from tests.unit.judges.rundir_fixture import (
    assistant,
    case_result,
    make_project,
    make_run,
    tool,
    tool_result,
)

EVAL = """
name: demo
dataset: {path: dataset}
outputs:
  - path: artifacts
  - path: reports/final
  - tool: mcp__jira__create
{traces}
judges:
  - name: j
    check: "return True, ''"
"""

EVENTS = [
    assistant("I will file it.", [tool("mcp__jira__create_issue", "t1", title="Bug"), tool("Bash", "t2", command="ls")]),
    tool_result("t1", '{"key": "ABC-1"}'),
    tool_result("t2", "a b"),
    assistant("Filed ABC-1."),
]


def _record(tmp_path: Path, case_files: dict[str, Any], *, traces: str = "", dataset: dict[str, Any] | None = None,
            run_files: dict[str, Any] | None = None, case_id: str = "c1", mode: str = "case") -> dict[str, Any]:
    config = make_project(tmp_path, EVAL.replace("{traces}", traces), dataset or {"c1": {"annotations": {"tier": "gold", "when": "2024-05-01"}}})
    run_root = make_run(tmp_path, config, {case_id: case_files} if case_files is not None else {}, run_files=run_files,
                        execution_mode=mode)
    loaded = load_eval_config(config)
    run = open_finished_run(run_root)
    files = read_case_files(run, case_id, loaded)
    return build_record(files, loaded.config.outputs, loaded.config.traces)


FULL_CASE = {
    "run_result.json": case_result(end_reason="timed_out", exit_code=-1, limits_hit=["memory"],
                                   permission_denials=[{"tool_name": "Bash", "tool_use_id": "t9", "tool_input": {"command": "curl x"}}]),
    "input.yaml": {"prompt": "file a bug", "extra": {"k": [1, 2]}},
    "artifacts/001-first.md": "# First",
    "artifacts/002-second.md": "# Second",
    "artifacts/sub/deep.txt": "deep",
    "artifacts/logo.png": b"\x89PNG\r\n\x1a\n\x00\xff\xfe",
    "reports/final/summary.md": "final",
    "_modified/src/app.py": "print('new')\n",
    "_modified/blob.bin": b"\xff\xfe\x00",
    "events.json": EVENTS,
    "stdout.log": '{"type":"result"}\n',
    "stderr.log": "warn\n",
    # The broker's log: decisions about the conversation's calls, and one about a call it never had
    # (the broker's socket is reachable from the sandbox).
    "tool_decisions.jsonl": [{"tool_name": "Bash", "tool_use_id": "t2", "decision": "allow"},
                             {"tool_name": "mcp__jira__create_issue", "tool_use_id": "t1", "decision": "deny"},
                             {"tool_name": "AskUserQuestion", "tool_use_id": "t2", "decision": "allow"},
                             {"tool_name": "Read", "tool_use_id": "forged", "decision": "deny"}],
    "hook_outputs.yaml": {"seed": 2, "token": "own"},
}


def test_full_record_has_every_contract_key(tmp_path: Path) -> None:
    record = _record(tmp_path, FULL_CASE, run_files={"hook_outputs.yaml": {"before_all": {"seed": 1, "db": "x"}, "cases": {"c1": {"token": "run"}}}})
    case_dir = str((tmp_path / "runs/demo").resolve() / os.listdir(tmp_path / "runs/demo")[0] / "cases" / "c1")
    assert record["files"]["artifacts/001-first.md"] == "# First"
    assert record["files"]["artifacts/sub/deep.txt"] == "deep"
    assert record["files"]["artifacts/logo.png"] == {"_binary": True, "path": f"{case_dir}/artifacts/logo.png", "name": "logo.png"}
    assert record["files"]["reports/final/summary.md"] == "final"
    assert record["files"]["_modified/src/app.py"] == "print('new')\n"
    assert record["files"]["_modified/blob.bin"]["_binary"] is True
    assert record["modified_files"] == {"src/app.py": "print('new')\n"}
    assert record["artifacts_content"] == "# First"
    assert record["artifacts_file"] == f"{case_dir}/artifacts/001-first.md"
    assert record["final_content"] == "final"
    assert record["tool_calls"] == [
        {"name": "mcp__jira__create_issue", "input": {"title": "Bug"}, "id": "t1", "result": '{"key": "ABC-1"}', "is_error": False}
    ]
    assert record["annotations"] == {"tier": "gold", "when": "2024-05-01"}
    assert record["inputs"] == {"prompt": "file a bug", "extra": {"k": [1, 2]}}
    assert record["conversation"] == "I will file it.\n\nFiled ABC-1."
    assert record["events"] == EVENTS
    assert (record["exit_code"], record["duration_s"], record["cost_usd"], record["num_turns"]) == (-1, 12.5, 0.02, 3)
    assert record["token_usage"]["output_tokens"] == 200
    assert record["stdout"] == '{"type":"result"}\n' and record["stderr"] == "warn\n"
    assert record["hook_outputs"] == {"seed": 2, "db": "x", "token": "own"}
    assert record["case_dir"] == case_dir
    assert record["end_reason"] == "timed_out"
    assert record["limits_hit"] == ["memory"]
    assert record["tool_decisions"] == [{"tool_name": "Bash", "tool_use_id": "t2", "decision": "allow"},
                                        {"tool_name": "mcp__jira__create_issue", "tool_use_id": "t1", "decision": "deny"}]
    assert record["permission_denials"][0]["tool_input"] == {"command": "curl x"}
    json.dumps(record)  # judge code receives it in another process


def test_yaml_dates_become_strings(tmp_path: Path) -> None:
    dataset = {"c1": {"annotations": {"due": None}}}
    config = make_project(tmp_path, EVAL.replace("{traces}", ""), dataset)
    (tmp_path / "project/dataset/c1/annotations.yaml").write_text("due: 2024-05-01\nat: 2024-05-01 10:00:00\n")
    run_root = make_run(tmp_path, config, {"c1": {}})
    loaded = load_eval_config(config)
    record = build_record(read_case_files(open_finished_run(run_root), "c1", loaded), loaded.config.outputs, loaded.config.traces)
    assert record["annotations"] == {"due": "2024-05-01", "at": "2024-05-01T10:00:00"}
    json.dumps(record)


def test_traces_toggles_gate_their_keys(tmp_path: Path) -> None:
    traces = "traces: {stdout: false, stderr: false, events: false, metrics: false}"
    record = _record(tmp_path, FULL_CASE, traces=traces)
    for key in ("stdout", "stderr", "events", "exit_code", "duration_s", "token_usage", "cost_usd", "num_turns"):
        assert key not in record
    # Derived keys and what the sandbox adds are not traces: they stay.
    assert record["conversation"] == "I will file it.\n\nFiled ABC-1."
    assert record["end_reason"] == "timed_out"
    assert record["files"]["artifacts/001-first.md"] == "# First"


def test_a_crashed_case_without_a_directory_still_gets_a_record(tmp_path: Path) -> None:
    config = make_project(tmp_path, EVAL.replace("{traces}", ""), {"c1": {"input": {"prompt": "from dataset"}}})
    run_root = make_run(tmp_path, config, {})
    result = json.loads((run_root / "run_result.json").read_text())
    result["per_case"] = {"c1": {"exit_code": 1, "end_reason": "error", "error": "sandbox vanished", "cost_usd": None}}
    (run_root / "run_result.json").write_text(json.dumps(result))
    loaded = load_eval_config(config)
    run = open_finished_run(run_root)
    assert run.case_ids == ["c1"]
    record = build_record(read_case_files(run, "c1", loaded), loaded.config.outputs, loaded.config.traces)
    assert record["files"] == {} and record["tool_calls"] == [] and record["events"] == []
    assert record["exit_code"] == 1 and record["end_reason"] == "error" and record["cost_usd"] is None
    assert record["inputs"] == {"prompt": "from dataset"}
    assert record["conversation"] == ""
    assert "stdout" not in record


def test_case_mode_never_falls_back_to_run_totals(tmp_path: Path) -> None:
    record = _record(tmp_path, {"stdout.log": "x"})
    assert record["cost_usd"] is None  # not the run's total of 0.5


def test_batch_mode_falls_back_to_run_level_logs_and_metrics(tmp_path: Path) -> None:
    run_files = {"stdout.log": "batch out", "stderr.log": "batch err", "events.json": [assistant("batch answer")]}
    record = _record(tmp_path, {"artifacts/a.md": "a"}, run_files=run_files, mode="batch")
    assert record["stdout"] == "batch out" and record["stderr"] == "batch err"
    assert record["conversation"] == "batch answer"
    assert record["cost_usd"] == 0.5 and record["num_turns"] == 6


def test_conversation_falls_back_to_the_cli_result_without_events(tmp_path: Path) -> None:
    record = _record(tmp_path, {"run_result.json": case_result(result="The final answer.")})
    assert record["conversation"] == "The final answer."


def test_all_tool_calls_when_no_tool_output_is_declared() -> None:
    files = CaseFiles(case_id="c", case_dir=Path("/runs/r/cases/c"), events=EVENTS)
    record = build_record(files, [OutputConfig(path="artifacts")], TracesConfig())
    assert [c["name"] for c in record["tool_calls"]] == ["mcp__jira__create_issue", "Bash"]


def test_damaged_files_are_problems_not_crashes(tmp_path: Path) -> None:
    record_files = {"events.json": "{not json", "run_result.json": "[1, 2]", "hook_outputs.yaml": "a: [b"}
    config = make_project(tmp_path, EVAL.replace("{traces}", ""), {"c1": {}})
    run_root = make_run(tmp_path, config, {"c1": record_files})
    loaded = load_eval_config(config)
    files = read_case_files(open_finished_run(run_root), "c1", loaded)
    assert len(files.problems) == 3
    assert any("events.json" in p for p in files.problems)
    record = build_record(files, loaded.config.outputs, loaded.config.traces)
    assert record["events"] == [] and record["exit_code"] is None


def test_symlinks_are_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("answer key")
    config = make_project(tmp_path, EVAL.replace("{traces}", ""), {"c1": {}})
    run_root = make_run(tmp_path, config, {"c1": {"artifacts/ok.md": "ok"}})
    (run_root / "cases/c1/artifacts/link.md").symlink_to(secret)
    (run_root / "cases/c1/artifacts/dirlink").symlink_to(tmp_path, target_is_directory=True)
    (run_root / "cases/c1/stdout.log").symlink_to(secret)
    loaded = load_eval_config(config)
    record = build_record(read_case_files(open_finished_run(run_root), "c1", loaded), loaded.config.outputs, loaded.config.traces)
    assert record["files"] == {"artifacts/ok.md": "ok"}
    assert "stdout" not in record


def test_oversized_text_is_truncated_with_a_note() -> None:
    files = CaseFiles(case_id="c", case_dir=Path("/r/cases/c"), artifacts=(FileBytes("artifacts/big.md", b"abc", truncated=True),))
    record = build_record(files, [OutputConfig(path="artifacts")], TracesConfig())
    assert record["files"]["artifacts/big.md"].startswith("abc\n[truncated: the file is larger than")


def test_a_flood_of_big_files_stays_within_the_record_caps(tmp_path: Path) -> None:
    """240 MiB of text under artifacts/ once took the controller to ~2.5 GiB: the record now holds
    at most 4 MiB of a file and 16 MiB of file contents in all, and says what it left out."""
    from agent_eval_sandbox.rundir.read import (
        MAX_RECORD_FILE_BYTES,
        MAX_RECORD_FILES_BYTES,
    )

    big = "y" * (6 * 1024 * 1024)
    files = {f"artifacts/part-{i:02d}.txt": big for i in range(5)}
    record = _record(tmp_path, {**files, "_modified/artifacts/part-00.txt": big})
    texts = [v for v in record["files"].values() if isinstance(v, str)]
    loaded = sum(len(t) for t in texts if not t.startswith("[not loaded"))
    assert loaded <= MAX_RECORD_FILES_BYTES + 10 * 200
    first = record["files"]["artifacts/part-00.txt"]
    assert len(first) < MAX_RECORD_FILE_BYTES + 200 and "[truncated: the file is larger than 4 MiB]" in first
    assert record["files"]["artifacts/part-04.txt"].startswith("[not loaded: the record already holds 16 MiB")
    assert "artifacts/part-04.txt" in record["files_truncated"] and "_modified/artifacts/part-00.txt" in record["files_truncated"]


def test_a_text_file_cut_inside_a_character_is_still_text() -> None:
    files = CaseFiles(case_id="c", case_dir=Path("/r/cases/c"),
                      artifacts=(FileBytes("artifacts/u.md", "héllo".encode()[:2], truncated=True),))
    record = build_record(files, [OutputConfig(path="artifacts")], TracesConfig())
    assert record["files"]["artifacts/u.md"].startswith("h\n[truncated")
