"""Cassettes: what the recorder writes (never a secret), what the reader accepts and refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_eval_sandbox.gateway.cassette import (
    FORMAT_VERSION,
    CassetteError,
    CassetteRecorder,
    load_cassette,
    parse_cassette,
)
from agent_eval_sandbox.gateway.credentials import PLACEHOLDER_API_KEY

KEY = 'sk-ant-real-"quoted"\\key-1234'  # quotes and a backslash: its JSON spelling differs


def _record(path: Path, **recorder: object) -> CassetteRecorder:
    return CassetteRecorder(path, "c1", [KEY], **recorder)  # type: ignore[arg-type]


def test_a_recording_reads_back_in_arrival_order_with_status_headers_body_and_timing(tmp_path):
    recorder = _record(tmp_path / "cassette.jsonl")
    first = recorder.begin("POST", "/v1/messages?beta=true",
                           [("X-Claude-Code-Session-Id", "s1"), ("x-api-key", PLACEHOLDER_API_KEY),
                            ("Authorization", "Bearer x"), ("User-Agent", "claude-cli/2.1.332")], {"n": 1})
    second = recorder.begin("POST", "/v1/messages/count_tokens", [], {"n": 2})
    second.respond(200, [("Content-Type", "application/json"), ("Set-Cookie", "a=b")], b'{"input_tokens": 3}')
    second.finish("forwarded")  # ends first: written first
    first.respond(200, [("content-type", "text/event-stream"), ("request-id", "req_1"), ("server", "x")])
    for piece in (b"event: message_start\ndata: {\"t\":\"\xe6\x97", b"\xa5\"}\n\n"):  # a character cut in two
        first.chunk(piece)
    first.finish("forwarded")
    recorder.close()

    cassette = load_cassette(tmp_path / "cassette.jsonl")
    assert cassette.header.cassette == FORMAT_VERSION and cassette.header.case_id == "c1" and cassette.complete
    assert [e.seq for e in cassette.entries] == [0, 1]
    entry = cassette.entries[0]
    assert entry.path == "/v1/messages?beta=true" and entry.request == {"n": 1}
    assert entry.headers == {"x-claude-code-session-id": "s1", "user-agent": "claude-cli/2.1.332"}
    assert entry.response is not None and entry.response.is_stream
    assert entry.response.headers == [("content-type", "text/event-stream"), ("request-id", "req_1")]
    assert entry.response.body_bytes() == "event: message_start\ndata: {\"t\":\"日\"}\n\n".encode()
    assert set(entry.timing) == {"headers_ms", "first_byte_ms", "end_ms"}
    assert cassette.entries[1].response.headers == [("content-type", "application/json")]


def test_no_secret_reaches_the_file_by_any_path(tmp_path):
    recorder = _record(tmp_path / "cassette.jsonl")
    tape = recorder.begin("POST", f"/v1/messages?k={KEY}", [("x-claude-code-session-id", KEY)],
                          {"messages": [{"role": "user", "content": f"env: ANTHROPIC_API_KEY={PLACEHOLDER_API_KEY}"},
                                        {"role": "user", "content": f"the key is {KEY}"}]})
    tape.respond(200, [("content-type", "text/event-stream"), ("request-id", KEY)])
    tape.chunk(f"data: {json.dumps({'text': KEY})}\n\n".encode())  # JSON-escaped inside the stream
    tape.chunk(f"data: {KEY} {PLACEHOLDER_API_KEY}\n\n".encode())
    tape.finish("forwarded", error=f"upstream said {KEY}")
    recorder.close()
    text = (tmp_path / "cassette.jsonl").read_text()
    assert "real-" not in text and "key-1234" not in text
    assert PLACEHOLDER_API_KEY not in text and "agent-eval-sandbox-placeholder" not in text
    assert text.count("[redacted]") >= 7
    load_cassette(tmp_path / "cassette.jsonl")  # still a valid cassette


def test_past_its_size_cap_a_cassette_counts_what_it_did_not_write(tmp_path):
    recorder = _record(tmp_path / "cassette.jsonl", max_bytes=2000)
    for n in range(5):
        tape = recorder.begin("POST", "/v1/messages", [], {"pad": "x" * 600, "n": n})
        tape.respond(200, [("content-type", "application/json")], b"{}")
        tape.finish("forwarded")
    recorder.close()
    cassette = load_cassette(tmp_path / "cassette.jsonl")
    assert 0 < len(cassette.entries) < 5
    assert cassette.end is not None and cassette.end.dropped == 5 - len(cassette.entries) and not cassette.complete


def test_bytes_that_are_not_utf8_are_kept_as_base64_and_an_unanswered_request_has_no_response(tmp_path):
    recorder = _record(tmp_path / "cassette.jsonl")
    tape = recorder.begin("POST", "/v1/messages", [], {})
    tape.respond(200, [("content-type", "application/octet-stream")], b"\xff\xfe raw")
    tape.finish("forwarded")
    recorder.begin("POST", "/v1/messages", [], {"left": True}).finish("client_disconnected", "gone")
    recorder.close()
    first, second = load_cassette(tmp_path / "cassette.jsonl").entries
    assert first.response.encoding == "base64" and first.response.body_bytes() == b"\xff\xfe raw"
    assert second.response is None and second.outcome == "client_disconnected" and second.error == "gone"


def test_a_line_separator_inside_a_string_does_not_split_a_line(tmp_path):
    recorder = _record(tmp_path / "cassette.jsonl")
    tape = recorder.begin("POST", "/v1/messages", [], {"text": "a\u2028b\u2029c\x85d"})
    tape.finish("forwarded")
    recorder.close()
    (entry,) = load_cassette(tmp_path / "cassette.jsonl").entries
    assert entry.request == {"text": "a\u2028b\u2029c\x85d"}


def test_a_recording_that_did_not_end_cleanly_reads_as_incomplete():
    header = json.dumps({"cassette": 1, "case_id": "c1"})
    entry = json.dumps({"seq": 0, "method": "POST", "path": "/v1/messages", "request": {}})
    cassette = parse_cassette([header, entry])
    assert len(cassette.entries) == 1 and cassette.end is None and not cassette.complete


@pytest.mark.parametrize(("lines", "message"), [
    ([], "empty cassette"),
    (["not json"], "x.jsonl:1: not a JSON line"),
    (["[1, 2]"], "x.jsonl:1: a line must be a JSON object"),
    (['{"cassette": 99}'], "x.jsonl:1: cassette format 99 is not supported"),
    (['{"no": "header"}'], "x.jsonl:1: cassette: Field required"),
    (['{"cassette": 1}', '{"seq": "first", "method": "POST", "path": "/"}'], "x.jsonl:2: seq:"),
    (['{"cassette": 1}', '{"seq": 0, "method": "POST", "path": "/", "response": {"body": ""}}'],
     "x.jsonl:2: response.status: Field required"),
])
def test_a_damaged_cassette_is_one_clear_error_naming_the_file_and_line(lines, message):
    with pytest.raises(CassetteError) as caught:
        parse_cassette(lines, "x.jsonl")
    assert message in caught.value.render() and "\n" not in caught.value.render()


def test_a_missing_cassette_is_a_user_error(tmp_path):
    with pytest.raises(CassetteError, match="cannot read the cassette .*nothing.jsonl"):
        load_cassette(tmp_path / "nothing.jsonl")
