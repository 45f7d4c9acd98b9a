import json

from agent_eval_sandbox.gateway.request_log import (
    REDACTED,
    LogRecord,
    RequestLog,
    parse_body,
    redact_headers,
    scrub,
)


def test_credential_headers_are_redacted_whatever_their_case():
    headers = redact_headers(
        [("X-Api-Key", "k"), ("authorization", "Bearer t"), ("Cookie", "c"), ("anthropic-version", "2023-06-01")]
    )
    assert headers == {
        "X-Api-Key": REDACTED,
        "authorization": REDACTED,
        "Cookie": REDACTED,
        "anthropic-version": "2023-06-01",
    }


def test_scrub_replaces_every_secret():
    assert scrub("a sk-1 b sk-2 sk-1", ["sk-1", "sk-2", ""]) == f"a {REDACTED} b {REDACTED} {REDACTED}"


def test_parse_body():
    assert parse_body(b"") is None
    assert parse_body(b'{"a": 1}') == {"a": 1}
    assert parse_body(b"\xff not json") == {"unparsed": "\ufffd not json"}


def _record(**overrides):
    base = dict(
        time="t",
        case_id="c",
        method="POST",
        path="/v1/messages",
        status=200,
        outcome="forwarded",
        duration_ms=1,
        request_headers={},
    )
    return LogRecord(**{**base, **overrides})


def test_log_lines_never_hold_a_secret(tmp_path):
    secret = 'sk-test-"quoted"-SECRET'
    log = RequestLog(tmp_path / "sub" / "log.jsonl", secrets=[secret])
    log.write(_record(request={"echo": secret}, error=f"upstream said {secret}"))
    log.close()
    text = (tmp_path / "sub" / "log.jsonl").read_text()
    assert "SECRET" not in text
    assert json.loads(text)["request"] == {"echo": REDACTED}


def test_writes_after_close_are_dropped(tmp_path):
    log = RequestLog(tmp_path / "log.jsonl")
    log.write(_record())
    log.close()
    log.write(_record(status=500))
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 1


def test_past_the_size_cap_bodies_are_left_out(tmp_path):
    path = tmp_path / "gateway.jsonl"
    log = RequestLog(path, max_bytes=2000)
    big = {"messages": ["x" * 3000]}
    log.write(LogRecord(time="t", case_id="c", method="POST", path="/v1/messages", status=200,
                        outcome="forwarded", duration_ms=1, request_headers={}, request=big))
    log.write(LogRecord(time="t", case_id="c", method="POST", path="/v1/messages", status=200,
                        outcome="forwarded", duration_ms=1, request_headers={}, request={"small": 1}))
    log.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["request"] is None and "log size cap" in lines[0]["error"]
    assert lines[1]["request"] == {"small": 1}
    assert path.stat().st_size < 2000
