"""A real Channel recording what it forwards from a stand-in upstream, and the same channel replaying it
from the replay server (no Docker): the client gets the same bytes, the cassette never the key."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_eval_sandbox.gateway import Credentials, ModelGateway
from agent_eval_sandbox.gateway.cassette import Cassette, load_cassette
from agent_eval_sandbox.gateway.credentials import PLACEHOLDER_API_KEY
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.gateway.replay_server import MISMATCH_STATUS, ReplayServer
from tests.standin_upstream import StandinUpstream

KEY = "sk-ant-host-" + "Wk3p" * 8
PATH = "/v1/messages?beta=true"


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="aes-rr-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _channel(sock_dir: Path, upstream_url: str, name: str, *, record: bool) -> tuple[ModelGateway, Channel]:
    gateway = ModelGateway(upstream_url, Credentials(api_key=KEY))
    channel = gateway.open_channel("c1", sock_dir / f"{name}.sock", 5.0, sock_dir / f"{name}.jsonl",
                                   cassette_path=sock_dir / f"{name}.cassette.jsonl" if record else None)
    return gateway, channel


def _client(channel: Channel) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(channel.socket_path)), base_url="http://gateway",
                        headers={"x-api-key": PLACEHOLDER_API_KEY, "x-claude-code-session-id": "sess-1"}, timeout=30)


def _conversation(client: httpx.Client) -> list[tuple[int, bytes]]:
    """Three turns of one conversation, each request carrying the answers before it back, as the CLI does."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "make notes"}]}]
    seen = []
    while len(seen) < 6:
        body = {"model": "claude-sonnet-4-6", "max_tokens": 1000, "stream": True, "messages": messages}
        response = client.post(PATH, json=body)
        seen.append((response.status_code, response.content))
        if response.status_code != 200:
            continue  # a retry: the same request again
        blocks = _content(response.content)
        messages = [*messages, {"role": "assistant", "content": blocks}]
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if not calls:
            break
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c["id"], "content": f"ran {c['name']} with {PLACEHOLDER_API_KEY}"}
            for c in calls]})
    return seen


def _content(sse: bytes) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    partial: dict[int, str] = {}
    for line in sse.decode().split("\n"):
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[event["index"]]["text"] += delta["text"]
            else:
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    return blocks


def _record(sock_dir: Path) -> tuple[list[tuple[int, bytes]], Cassette, StandinUpstream, Channel]:
    with StandinUpstream(overload_turn=1) as upstream:
        gateway, channel = _channel(sock_dir, upstream.url, "rec", record=True)
        with _client(channel) as client:
            seen = _conversation(client)
        channel.close()
        gateway.close()
    return seen, load_cassette(sock_dir / "rec.cassette.jsonl"), upstream, channel


def test_the_channel_records_each_exchange_as_forwarded_and_as_the_upstream_sent_it(sock_dir):
    seen, cassette, upstream, channel = _record(sock_dir)
    assert [s for s, _ in seen][:2] == [200, 529] and seen[-1][0] == 200
    assert cassette.complete and len(cassette.entries) == len(upstream.sent) == len(seen)
    for entry, sent, (status, received) in zip(cassette.entries, upstream.sent, seen, strict=True):
        # the body as forwarded, but for the placeholder key
        assert entry.request == json.loads(json.dumps(sent.body).replace(PLACEHOLDER_API_KEY, "[redacted]"))
        assert entry.response is not None and entry.response.status == sent.status == status
        assert entry.response.body_bytes() == sent.raw == received  # the bytes as passed on
        assert entry.headers["x-claude-code-session-id"] == "sess-1" and entry.outcome == "forwarded"
    assert cassette.entries[1].response.headers == [("content-type", "application/json"), ("retry-after", "0")]
    # the upstream got the host's key; the cassette holds neither it nor the placeholder
    assert all(s.headers["x-api-key"] == KEY for s in upstream.sent)
    text = (sock_dir / "rec.cassette.jsonl").read_text()
    assert "Wk3p" not in text and PLACEHOLDER_API_KEY not in text and "[redacted]" in text
    # the request log is the same as without recording
    log = [json.loads(line) for line in channel.log_path.read_text().splitlines()]
    assert [r["status"] for r in log] == [s for s, _ in seen]


def test_a_channel_without_a_cassette_path_records_nothing(sock_dir):
    with StandinUpstream() as upstream:
        gateway, channel = _channel(sock_dir, upstream.url, "plain", record=False)
        with _client(channel) as client:
            _conversation(client)
        channel.close()
        gateway.close()
    assert channel.recorder is None and not (sock_dir / "plain.cassette.jsonl").exists()


def test_an_unreachable_upstream_is_recorded_as_the_502_the_client_got(sock_dir):
    gateway, channel = _channel(sock_dir, "http://127.0.0.1:9", "down", record=True)
    with _client(channel) as client:
        response = client.post(PATH, json={"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": []})
    channel.close()
    gateway.close()
    (entry,) = load_cassette(sock_dir / "down.cassette.jsonl").entries
    assert response.status_code == 502 and entry.response.status == 502 and entry.outcome == "upstream_error"
    assert entry.response.body_bytes() == response.content


def test_the_replay_server_behind_the_channel_gives_the_client_the_recorded_bytes(sock_dir):
    seen, cassette, _, _ = _record(sock_dir)
    with ReplayServer(cassette) as server:
        gateway, channel = _channel(sock_dir, server.url, "rep", record=False)
        with _client(channel) as client:
            replayed = _conversation(client)
        channel.close()
        gateway.close()
        verdict = server.verdict()
    assert replayed == seen and verdict is None
    # the gateway charged the replayed usage as it charged the recorded one
    log = [json.loads(line) for line in channel.log_path.read_text().splitlines()]
    recorded_log = [json.loads(line) for line in (sock_dir / "rec.jsonl").read_text().splitlines()]
    assert [r["cost_usd"] for r in log] == [r["cost_usd"] for r in recorded_log]


def test_the_replay_server_refuses_a_request_it_does_not_hold_without_a_retry_and_says_why(sock_dir):
    _, cassette, _, _ = _record(sock_dir)
    with ReplayServer(cassette) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.head("/").status_code == 200
        response = client.post(PATH, json={"model": "claude-sonnet-4-6", "messages": [{"role": "user",
                                                                                          "content": "other"}]})
        again = client.post(PATH, json=cassette.entries[0].request)  # what was recorded: too late
        verdict = server.verdict()
    assert response.status_code == MISMATCH_STATUS and response.headers["x-should-retry"] == "false"
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith(
        "agent-eval-sandbox replay mismatch: request 1 of the replay")
    assert again.status_code == MISMATCH_STATUS
    assert verdict is not None and verdict.summary in error["message"]
