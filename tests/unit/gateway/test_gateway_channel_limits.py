"""A real Channel on a temp socket in front of the scripted model server: reservations,
the request policy, streams cut short, connection caps and idle timeouts (no Docker)."""

from __future__ import annotations

import gc
import json
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_eval_sandbox.gateway import (
    Credentials,
    ModelGateway,
    ScriptedModelServer,
    parse_script,
)
from agent_eval_sandbox.gateway.budget import input_token_bound
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.gateway.policy import GatewayPolicy, ModelAllowlist
from agent_eval_sandbox.gateway.sse import encode_event, message_events
from agent_eval_sandbox.gateway.usage import Usage

POLICY = GatewayPolicy(models=ModelAllowlist.of(["claude-sonnet-4-6"]))


def _body(max_tokens: int = 1000, pad: int = 0, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-6", "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "x" * pad or "hi"}], **extra}


def _client(path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://gateway", timeout=30)


def _log(channel: Channel) -> list[dict[str, Any]]:
    return [json.loads(line) for line in channel.log_path.read_text().splitlines()]


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="aes-gw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _open(upstream_url: str, sock_dir: Path, budget: float, **channel: Any) -> tuple[ModelGateway, Channel]:
    gateway = ModelGateway(upstream_url, Credentials(api_key="sk-host"), policy=channel.pop("policy", POLICY))
    opened = Channel("c", sock_dir / "g.sock", budget, sock_dir / "gateway.jsonl", upstream_url=upstream_url,
                     credentials=gateway.credentials, client=gateway._client, policy=gateway.policy, **channel)
    return gateway, opened.start()


def _scripted(steps: list[dict[str, Any]]) -> ScriptedModelServer:
    return ScriptedModelServer(parse_script({"advance": "per_request", "steps": steps})).start()


# ---- reservations ------------------------------------------------------------------------------


def test_requests_sent_at_once_reserve_within_the_budget_and_the_rest_are_refused(sock_dir):
    """The attack that once recorded $2.40 on a $0.50 budget: 8 slow requests at once."""
    usage = {"input_tokens": 5000, "output_tokens": 20000}  # $0.015 + $0.30 each, when read to the end
    upstream = _scripted([{"text": "slow", "delay_s": 1.0, "usage": usage}] * 8)
    gateway, channel = _open(upstream.url, sock_dir, 0.5)
    statuses: list[int] = []

    def post() -> None:
        with _client(channel.socket_path) as client:
            statuses.append(client.post("/v1/messages", json=_body(20000, pad=30_000)).status_code)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    channel.close()
    gateway.close()
    upstream.close()
    assert sorted(statuses).count(200) == 2 and statuses.count(402) == 6, statuses
    assert channel.spent_usd <= 0.5 and channel.ledger.reserved_usd == 0
    log = _log(channel)
    forwarded = [r for r in log if r["outcome"] == "forwarded"]
    # The first fits whole; the second gets what is left, its max_tokens lowered in the body sent upstream.
    assert sorted(r["max_tokens_lowered_from"] or 0 for r in forwarded) == [0, 20000]
    sent = sorted(r.body["max_tokens"] for r in upstream.requests)
    assert sent[1] == 20000 and 1024 <= sent[0] < 20000
    assert all(r["cost_usd"] <= r["reserved_usd"] for r in forwarded)
    refused = [r for r in log if r["outcome"] == "over_budget"]
    assert len(refused) == 6 and all("budget exhausted" in r["response"]["error"]["message"] for r in refused)


def test_a_zero_budget_refuses_every_request(sock_dir):
    upstream = _scripted([{"text": "never"}])
    gateway, channel = _open(upstream.url, sock_dir, 0.0)
    with _client(channel.socket_path) as client:
        reply = client.post("/v1/messages", json=_body(10))
    channel.close()
    gateway.close()
    upstream.close()
    assert reply.status_code == 402 and reply.headers["x-should-retry"] == "false"
    assert upstream.requests == [] and channel.refused == 1


def test_count_tokens_is_free_but_still_checked(sock_dir):
    upstream = _scripted([{"text": "n/a"}])
    gateway, channel = _open(upstream.url, sock_dir, 0.0)
    with _client(channel.socket_path) as client:
        counted = client.post("/v1/messages/count_tokens", json={"model": "claude-sonnet-4-6", "messages": []})
        other = client.post("/v1/messages/count_tokens", json={"model": "claude-opus-4-6", "messages": []})
    channel.close()
    gateway.close()
    upstream.close()
    assert counted.status_code == 200 and other.status_code == 400
    assert channel.spent_usd == 0 and [r.path for r in upstream.requests] == ["/v1/messages/count_tokens"]


def test_the_ceiling_caps_an_absurd_max_tokens_and_the_log_says_from_what(sock_dir):
    upstream = _scripted([{"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 10}}])
    gateway, channel = _open(upstream.url, sock_dir, 100.0,
                             policy=GatewayPolicy(models=POLICY.models, max_tokens_ceiling=4096))
    body = _body(10**9, thinking={"type": "enabled", "budget_tokens": 10**9 - 1})
    with _client(channel.socket_path) as client:
        assert client.post("/v1/messages", json=body).status_code == 200
    channel.close()
    gateway.close()
    upstream.close()
    (sent,) = upstream.requests
    assert sent.body["max_tokens"] == 4096 and sent.body["thinking"]["budget_tokens"] == 4095
    (record,) = _log(channel)
    assert record["max_tokens_lowered_from"] == 10**9 and record["request"]["max_tokens"] == 4096


# ---- the policy ----------------------------------------------------------------------------------


def test_what_the_policy_refuses_never_reaches_the_upstream(sock_dir):
    upstream = _scripted([{"text": "ok"}] * 4)
    gateway, channel = _open(upstream.url, sock_dir, 10.0)
    refused = [
        _body(model="claude-opus-4-6"),
        _body(tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}]),
        _body(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
        _body(mcp_servers=[{"type": "url", "url": "http://127.0.0.1:9/mcp", "name": "m"}]),
        _body(max_tokens="lots"),
    ]
    with _client(channel.socket_path) as client:
        replies = [client.post("/v1/messages", json=body) for body in refused]
        not_json = client.post("/v1/messages", content=b"{nope")
        allowed = client.post("/v1/messages", json=_body(), headers={
            "anthropic-beta": "claude-code-20250219,mcp-client-2025-11-20,web-fetch-2025-09-10"})
    channel.close()
    gateway.close()
    upstream.close()
    assert [r.status_code for r in replies] == [400] * len(refused) and not_json.status_code == 400
    assert all(r.json()["error"]["type"] == "invalid_request_error" for r in replies)
    assert "model 'claude-opus-4-6' is not allowed" in replies[0].json()["error"]["message"]
    assert allowed.status_code == 200
    (sent,) = upstream.requests
    assert sent.headers["anthropic-beta"] == "claude-code-20250219" and sent.headers["x-api-key"] == "sk-host"
    log = _log(channel)
    assert [r["outcome"] for r in log] == ["policy_refused"] * 6 + ["forwarded"]
    assert log[-1]["betas_dropped"] == ["mcp-client-2025-11-20", "web-fetch-2025-09-10"]
    assert log[0]["model"] == "claude-opus-4-6" and "not allowed" in log[0]["error"]


# ---- streams cut short --------------------------------------------------------------------------


class _StreamUpstream(BaseHTTPRequestHandler):
    """A long stream: message_start, many text deltas, then the end (or a break, if `break_after`)."""

    protocol_version = "HTTP/1.1"
    break_after: int | None = None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        message = {"id": "msg_1", "model": "claude-sonnet-4-6", "role": "assistant", "type": "message",
                   "content": [{"type": "text", "text": "y" * 3_000_000}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 1000, "output_tokens": 100_000}}
        events = message_events(message, chunk_chars=3000)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for index, event in enumerate(events):
                if self.break_after is not None and index >= self.break_after:
                    self.close_connection = True
                    return  # no terminating chunk: a broken stream
                data = encode_event(*event)
                self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stream_upstream() -> Iterator[tuple[str, type[_StreamUpstream]]]:
    handler = type("Handler", (_StreamUpstream,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_a_stream_the_client_cuts_off_is_charged_at_least_its_reservation(sock_dir, stream_upstream):
    url, _ = stream_upstream
    gateway, channel = _open(url, sock_dir, 5.0)
    request = json.dumps(_body(100_000, stream=True)).encode()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(channel.socket_path))
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%b" % (len(request), request))
        received = b""
        while b"message_start" not in received:
            received += sock.recv(65536)
        # ...then hang up, long before message_delta
    channel.close()
    gateway.close()
    (record,) = _log(channel)
    reserved = input_token_bound(len(request)) * 6e-6 + 100_000 * 15e-6  # $1.50 and a bit
    assert record["outcome"] == "client_disconnected" and record["reserved_usd"] == pytest.approx(reserved)
    assert record["cost_usd"] >= reserved and channel.spent_usd >= reserved
    assert "client went away" in record["charge_note"]


def test_a_stream_that_breaks_off_is_charged_what_was_reported_and_streamed(sock_dir, stream_upstream):
    url, handler = stream_upstream
    handler.break_after = 300  # message_start, ping, block start and ~297 deltas of 3,000 characters
    gateway, channel = _open(url, sock_dir, 5.0)
    with _client(channel.socket_path) as client, client.stream(
            "POST", "/v1/messages", json=_body(100_000, stream=True)) as response:
        tail = b"".join(response.iter_raw())[-300:]
    channel.close()
    gateway.close()
    assert b"event: error" in tail
    (record,) = _log(channel)
    assert record["outcome"] == "upstream_error" and "ended before the final usage" in record["charge_note"]
    # ~891,000 characters streamed at 3 a token, plus the input side message_start reported.
    assert record["usage"]["input_tokens"] == 1000 and record["usage"]["output_tokens"] == 297_000
    assert record["cost_usd"] == pytest.approx(1000 * 3e-6 + 297_000 * 15e-6)


# ---- connections ----------------------------------------------------------------------------------


def _eof_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_connections_over_the_cap_are_closed_at_once_without_a_thread(sock_dir):
    upstream = _scripted([{"text": "after the flood"}])
    gateway, channel = _open(upstream.url, sock_dir, 1.0, max_connections=8)
    threads_before = threading.active_count()
    hogs = []
    for _ in range(40):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(channel.socket_path))
        hogs.append(sock)
    deadline = time.monotonic() + 5
    while channel.connections_refused < 32 and time.monotonic() < deadline:
        time.sleep(0.01)
    closed = [_eof_within(sock, 0.5) for sock in hogs[8:]]
    assert channel.connections_refused == 32 and all(closed)  # 8 of the 40 are held
    assert threading.active_count() - threads_before <= 8 + 1
    for sock in hogs:
        sock.close()
    time.sleep(0.2)
    with _client(channel.socket_path) as client:
        assert client.post("/v1/messages", json=_body()).status_code == 200
    channel.close()
    gateway.close()
    upstream.close()
    log = _log(channel)
    flood = [r for r in log if r["outcome"] == "too_many_connections"]
    assert len(flood) == 11  # the first 10 refusals, then one line with the total at close
    assert "32 connections in all" in flood[-1]["error"]


def test_an_idle_connection_is_closed_and_the_client_reconnects(sock_dir):
    upstream = _scripted([{"text": "one"}, {"text": "two"}])
    gateway, channel = _open(upstream.url, sock_dir, 1.0, idle_timeout_s=0.5)
    with socket.socket(socket.AF_UNIX) as idle:
        idle.connect(str(channel.socket_path))
        started = time.monotonic()
        assert _eof_within(idle, 5) and time.monotonic() - started < 3
    with _client(channel.socket_path) as client:  # keep-alive: the second request finds its connection closed
        assert client.post("/v1/messages", json=_body()).status_code == 200
        time.sleep(1.0)
        assert client.post("/v1/messages", json=_body()).status_code == 200
    channel.close()
    gateway.close()
    upstream.close()


def test_closing_a_channel_drops_its_idle_connections(sock_dir):
    upstream = _scripted([{"text": "x"}])
    gateway, channel = _open(upstream.url, sock_dir, 1.0)
    with socket.socket(socket.AF_UNIX) as idle:
        idle.connect(str(channel.socket_path))
        # A probe answered: the connection is served, and idle in keep-alive from here on.
        idle.sendall(b"HEAD / HTTP/1.1\r\nHost: g\r\n\r\n")
        assert idle.recv(65536).startswith(b"HTTP/1.1 200")
        channel.close()
        assert _eof_within(idle, 2)
    gateway.close()
    upstream.close()


# ---- calls made on the case's behalf (the hook model) -----------------------------------------


def test_calls_on_the_cases_behalf_reserve_and_are_charged_and_logged(sock_dir):
    upstream = _scripted([{"text": "x"}])
    gateway, channel = _open(upstream.url, sock_dir, 0.01)
    held = channel.reserve_usd(0.008)
    assert held is not None and channel.reserve_usd(0.003) is None and channel.ledger.reserved_usd == 0.008
    cost = channel.charge_call(held, model="claude-haiku-4-5", usage=Usage(input_tokens=1000, output_tokens=100))
    assert cost == pytest.approx(0.0015) and channel.spent_usd == pytest.approx(0.0015) and channel.ledger.reserved_usd == 0
    second = channel.reserve_usd(0.005)
    assert channel.charge_call(second, model="claude-haiku-4-5", usage=None, at_least_usd=0.005,
                               error="ReadTimeout") == 0.005
    channel.close()
    gateway.close()
    upstream.close()
    records = _log(channel)
    assert [r["outcome"] for r in records] == ["hook_model", "hook_model"]
    assert records[0]["usage"]["input_tokens"] == 1000 and records[1]["spent_usd"] == pytest.approx(0.0065)
    assert records[0]["request"] is None  # the prompt (which holds case context) is not logged here


def test_a_long_run_s_gateway_lets_go_of_closed_channels(sock_dir):
    """A run opens a channel per case: a closed one (and the conversation it recorded) is not kept
    for the rest of the run, while open ones still close with the gateway."""
    upstream = _scripted([{"text": "ok"}] * 4)
    gateway = ModelGateway(upstream.url, Credentials(api_key="sk-host"), policy=POLICY)
    first = gateway.open_channel("c1", sock_dir / "1.sock", 1.0, sock_dir / "1.jsonl")
    with _client(first.socket_path) as client:
        assert client.post("/v1/messages", json=_body(10)).status_code == 200
    first.close()
    gone = weakref.ref(first)
    del first
    second = gateway.open_channel("c2", sock_dir / "2.sock", 1.0, sock_dir / "2.jsonl")
    deadline = time.monotonic() + 5  # the request's handler thread may still be ending, holding it
    while gc.collect() >= 0 and gone() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gone() is None
    gateway.close()
    upstream.close()
    assert second.closed
