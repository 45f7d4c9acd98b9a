"""Reading what report.html shows from a run directory: capped, never following links, never raising."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent_eval_sandbox.report.facts import OUTPUT_FILE_BYTES, read_case_view, read_run_view
from agent_eval_sandbox.rundir.read import open_finished_run
from tests.unit.judges.rundir_fixture import assistant, case_result, make_run
from tests.unit.report.run_fixture import (
    HOSTILE_CASE,
    NON_UTF8_NAME,
    SCRIPT,
    make_failing_run,
    make_interrupted_run,
)


def test_a_case_view_holds_prompt_input_conversation_outputs_and_diff(tmp_path: Path) -> None:
    run = open_finished_run(make_failing_run(tmp_path))
    view = read_case_view(run, HOSTILE_CASE)
    assert view.location == f"cases/{HOSTILE_CASE}"
    assert view.outcome is not None and view.outcome.integrity.dropped == 1
    assert view.prompt is not None and view.prompt.text == f"/greeter {SCRIPT}"
    assert view.input is not None and SCRIPT in (view.input.text or "")
    assert view.events is not None and any(e.get("type") == "tool_result" and e.get("is_error") for e in view.events)
    files = {f.path.removeprefix(f"cases/{HOSTILE_CASE}/"): f for f in view.files}
    assert set(files) == {"artifacts/greeting.md", "artifacts/picture.png", f"artifacts/{os.fsdecode(NON_UTF8_NAME)}"}
    assert files["artifacts/picture.png"].text is None  # binary: listed, not shown
    assert files["artifacts/greeting.md"].text is not None and SCRIPT in files["artifacts/greeting.md"].text
    assert view.diff is not None and "notes.txt" in (view.diff.text or "")
    assert "events.json" in view.present and "prompt.txt" in view.present
    assert not any(name in files for name in ("events.json", "run_result.json", "prompt.txt"))  # the tool's own


def test_what_is_missing_is_a_note_not_an_error(tmp_path: Path) -> None:
    run = open_finished_run(make_failing_run(tmp_path))
    view = read_case_view(run, "005-gateway-reset")
    assert view.prompt is None and view.events is None and view.files == () and view.diff is None
    assert view.events_note and "not recorded" in view.events_note
    (run.case("001-ada").events).write_text("{not json")
    broken = read_case_view(run, "001-ada")
    assert broken.events is None and broken.events_note
    assert read_case_view(run, "no-such-case").outcome is None
    outside = read_case_view(run, "../../etc")  # a case id from an edited summary.json is never a path
    assert outside.outcome is None and outside.prompt is None and outside.files == () and outside.present == ()


def test_big_files_are_read_only_up_to_a_cap_and_symlinks_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    root = make_run(tmp_path, None, {"c": {"run_result.json": case_result(), "out/big.txt": "x" * (OUTPUT_FILE_BYTES * 3)}})
    (root / "cases" / "c" / "out" / "link.txt").symlink_to(secret)
    (root / "cases" / "c" / "prompt.txt").symlink_to(secret)
    view = read_case_view(open_finished_run(root), "c")
    assert [f.path for f in view.files] == ["cases/c/out/big.txt"]
    big = view.files[0]
    assert big.truncated and big.size == OUTPUT_FILE_BYTES * 3 and len(big.text or "") == OUTPUT_FILE_BYTES
    assert view.prompt is None


def test_the_run_view_reads_the_header_and_the_interruption(tmp_path: Path) -> None:
    failing = read_run_view(open_finished_run(make_failing_run(tmp_path / "f")), "fallback")
    assert (failing.eval, failing.model, failing.offline, failing.claude_version) == (
        "browser", "claude-sonnet-4-6", True, "2.1.332")
    assert failing.image == "agent-eval-sandbox:2.1.332-test" and failing.wall_clock_s == 73.2
    assert failing.token_usage["input_tokens"] == 12345 and failing.cost_usd == 0.1234
    assert failing.has_result and not failing.interrupted and failing.batch is None
    interrupted = read_run_view(open_finished_run(make_interrupted_run(tmp_path / "i")), "x")
    assert (interrupted.interrupted, interrupted.planned, interrupted.finished, interrupted.offline) == (
        True, 4, 2, False)


def test_a_damaged_run_json_leaves_the_header_unknown(tmp_path: Path) -> None:
    root = make_run(tmp_path, None, {"c": {"run_result.json": case_result()}})
    (root / "run.json").write_text(json.dumps({"offline": "yes", "settings": [1], "claude_version": 3}))
    (root / "run_result.json").unlink()
    view = read_run_view(open_finished_run(root), "demo")
    assert view.offline is None and view.model is None and view.claude_version is None
    assert not view.has_result and view.eval == "demo"


def test_batch_mode_shows_the_single_conversation_once(tmp_path: Path) -> None:
    root = make_run(tmp_path, None, {"a": {}, "b": {}}, execution_mode="batch",
                    run_files={"events.json": [assistant("batch says hi")], "prompt.txt": "do all"})
    run = open_finished_run(root)
    view = read_run_view(run, "demo")
    assert view.batch is not None and view.batch.events == [assistant("batch says hi")]
    case = read_case_view(run, "a")
    assert case.events is None and case.events_note and "batch mode" in case.events_note
    assert case.prompt is not None and case.prompt.text == "do all"
