"""tool_decisions.jsonl stays bounded whatever the sandbox sends: per string, per record, per file."""

from __future__ import annotations

import json

from agent_eval_sandbox.interception.decision_log import (
    MAX_ITEMS,
    MAX_RECORD_BYTES,
    MAX_STRING_CHARS,
    DecisionLog,
    bounded_record,
    truncated,
)


def _record(tool_input: object, **extra: object) -> dict:
    return {"time": "t", "case_id": "c", "tool_name": "Write", "tool_use_id": "toolu_1", "tool_input": tool_input,
            "decision": "pass", "reason": "no handler matches", "answers": None, "answer_details": None, **extra}


def test_long_strings_are_cut_with_a_marker_and_their_length():
    cut = truncated({"content": "x" * 100_000, "short": "ok", "k" * 10_000: 1})
    assert cut["content"] == "x" * MAX_STRING_CHARS + "…[truncated: 100000 chars]"
    assert cut["short"] == "ok"
    assert any(key.endswith("…[truncated: 10000 chars]") for key in cut)


def test_long_and_deep_containers_are_shortened_with_a_marker():
    cut = truncated({"items": list(range(MAX_ITEMS + 50))})
    assert cut["items"][:MAX_ITEMS] == list(range(MAX_ITEMS)) and cut["items"][-1] == "[truncated: 50 more items]"
    wide = truncated({str(n): n for n in range(MAX_ITEMS + 3)})
    assert wide["[truncated]"] == "3 more keys" and len(wide) == MAX_ITEMS + 1
    deep: object = "bottom"
    for _ in range(100):
        deep = [deep]
    assert "[truncated: nested too deep]" in json.dumps(truncated(deep))


def test_a_record_still_too_long_keeps_only_the_sizes_of_its_big_fields():
    many = {f"field{n}": "y" * MAX_STRING_CHARS for n in range(100)}  # 800 KiB after truncation
    record = bounded_record(_record(many))
    assert record["tool_input"]["truncated"] is True and record["tool_input"]["bytes"] > MAX_RECORD_BYTES
    assert record["tool_name"] == "Write" and "record over" in record["bodies_dropped"]
    assert len(json.dumps(record)) < 4096
    small = bounded_record(_record({"file_path": "a", "content": "b"}))
    assert small == _record({"file_path": "a", "content": "b"})


def test_past_the_file_cap_records_keep_metadata_then_are_counted(tmp_path):
    log = DecisionLog(tmp_path / "tool_decisions.jsonl", max_bytes=20_000, metadata_allowance=5_000)
    for n in range(200):
        log.write(_record({"content": "z" * 5000}, tool_use_id=f"t{n}"))
    dropped = log.dropped
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "tool_decisions.jsonl").read_text().splitlines()]
    size = (tmp_path / "tool_decisions.jsonl").stat().st_size
    assert size < 20_000 + 5_000 + 2_000 and dropped > 100
    assert lines[0]["tool_input"] == {"content": "z" * 5000}
    metadata_only = [line for line in lines if line.get("bodies_dropped")]
    assert metadata_only and all(line["tool_input"] is None and line["tool_name"] == "Write" for line in metadata_only)
    assert f"{dropped} record(s) not written" in lines[-1]["log_note"] and lines[-1]["tool_use_id"] == "t199"


def test_a_lone_surrogate_is_carried_through_not_unwritable(tmp_path):
    log = DecisionLog(tmp_path / "d.jsonl")
    log.write(_record(json.loads('{"content": "\\ud800"}')))
    log.close()
    assert json.loads((tmp_path / "d.jsonl").read_text())["tool_input"]["content"] == "\ud800"
