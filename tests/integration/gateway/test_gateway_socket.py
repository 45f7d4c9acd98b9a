"""The gateway over its unix socket: allowlist, upstream failures, streaming, accounting."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic
import httpx
import httpx2
import pytest

from agent_eval_sandbox.cpu_share import CpuShare
from agent_eval_sandbox.gateway import (
    Credentials,
    ModelGateway,
    ScriptedModelServer,
    parse_script,
)
from agent_eval_sandbox.gateway.sse import SSEDecoder, encode_event, message_events
from agent_eval_sandbox.gateway.usage import Usage

SECRET = "sk-test-SECRET-socket"
# max_tokens covers the scripted usage below: the scripted server, like the API, bills no more output.
BODY = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}


def uds_client(path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://gateway", timeout=10)


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    script = parse_script(
        {
            "advance": "per_request",
            "steps": [
                {"text": f"answer {i}", "usage": {"input_tokens": 1000, "output_tokens": 100}} for i in range(10)
            ],
        }
    )
    with ScriptedModelServer(script) as server:
        yield server


@pytest.fixture
def gateway(scripted: ScriptedModelServer) -> Iterator[ModelGateway]:
    with ModelGateway(scripted.url, Credentials(api_key=SECRET)) as gateway:
        yield gateway


def test_only_model_endpoints_pass_everything_else_is_403_and_logged(gateway, scripted, tmp_path, read_log):
    channel = gateway.open_channel("c", tmp_path / "s" / "g.sock", 1.0, tmp_path / "log.jsonl")
    with uds_client(channel.socket_path) as client:
        assert client.head("/").status_code == 200
        assert client.post("/v1/messages?beta=true", json=BODY).status_code == 200
        denied = [
            client.get("/v1/models"),
            client.post("/v1/files", content=b"data"),
            client.delete("/v1/messages"),
            client.get("/v1/messages"),
            client.post("/v1/messages/batches", json=BODY),
            client.request("OPTIONS", "/v1/messages"),
        ]
    channel.close()
    assert [r.status_code for r in denied] == [403] * len(denied)
    assert denied[0].json()["error"]["type"] == "permission_error"
    assert "not allowed" in denied[0].json()["error"]["message"]
    # Only the model request reached the upstream; the probe was answered by the gateway itself.
    assert [r.path for r in scripted.requests] == ["/v1/messages?beta=true"]
    records = read_log(tmp_path / "log.jsonl")
    assert [r["outcome"] for r in records] == ["local", "forwarded"] + ["forbidden"] * len(denied)
    assert records[3]["request"] == {"unparsed": "data"}
    assert channel.requests == 2 + len(denied)


def _raw_request(path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "target", [b"//evil.example/v1/messages", b"http://evil.example/v1/messages", b"evil.example:443"]
)
def test_request_targets_that_name_another_host_are_refused(gateway, scripted, tmp_path, target):
    channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
    method = b"CONNECT" if b"/" not in target else b"POST"
    reply = _raw_request(
        channel.socket_path,
        method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    )
    assert reply.startswith(b"HTTP/1.1 403")
    assert scripted.requests == []


def test_upstream_down_is_a_502_and_the_gateway_lives_on(tmp_path, read_log):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    with ModelGateway(f"http://127.0.0.1:{dead_port}", Credentials(api_key=SECRET)) as gateway:
        channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
        with uds_client(channel.socket_path) as client:
            first = client.post("/v1/messages", json=BODY)
            second = client.post("/v1/messages", json={**BODY, "stream": True})
            assert client.head("/").status_code == 200
    assert first.status_code == second.status_code == 502
    assert first.json()["error"]["type"] == "api_error"
    assert str(dead_port) not in first.text  # upstream details stay in the host-side log
    records = read_log(tmp_path / "log.jsonl")
    assert [r["outcome"] for r in records] == ["upstream_error", "upstream_error", "local"]
    assert str(dead_port) in records[0]["error"] and "ConnectError" in records[0]["error"]


def test_the_sdk_through_the_gateway_is_charged_from_json_usage(gateway, scripted, tmp_path, read_log):
    channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
    # The SDK brings its own HTTP stack (httpx2), which takes the same transport options.
    http_client = httpx2.Client(transport=httpx2.HTTPTransport(uds=str(channel.socket_path)))
    client = anthropic.Anthropic(base_url="http://gateway", api_key="placeholder", http_client=http_client)
    message = client.messages.create(model="claude-haiku-4-5", max_tokens=100, messages=BODY["messages"])
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=100, messages=BODY["messages"]) as stream:
        streamed = stream.get_final_message()
    client.close()
    channel.close()
    assert message.content[0].text == "answer 0" and streamed.content[0].text == "answer 1"
    # haiku 4.5: 1000 x $1 + 100 x $5 per MTok, twice.
    assert channel.spent_usd == pytest.approx(2 * 0.0015)
    records = read_log(tmp_path / "log.jsonl")
    assert [r["usage"] for r in records] == [Usage(input_tokens=1000, output_tokens=100).model_dump()] * 2
    assert records[0]["response"]["content"][0]["text"] == "answer 0"
    assert records[1]["response"]["message"]["content"][0]["text"] == "answer 1"
    assert [r["cost_usd"] for r in records] == [pytest.approx(0.0015)] * 2
    assert [r["spent_usd"] for r in records] == [pytest.approx(0.0015), pytest.approx(0.003)]


def test_an_unknown_model_is_charged_the_top_price_and_the_log_says_so(gateway, tmp_path, read_log):
    channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
    with uds_client(channel.socket_path) as client:
        assert client.post("/v1/messages", json={**BODY, "model": "claude-next-9"}).status_code == 200
    channel.close()
    record = read_log(tmp_path / "log.jsonl")[0]
    assert "unknown model 'claude-next-9'" in record["price_note"]
    assert record["cost_usd"] == pytest.approx(1000 * 15e-6 + 100 * 75e-6)


def test_cases_are_told_apart_by_socket(gateway, tmp_path, read_log):
    # Enough for one request's reservation ($0.0017: ~34 input tokens at $6 and 100 output at $15 per MTok);
    # the scripted answer then costs $0.0045, so the second is refused.
    poor = gateway.open_channel("poor", tmp_path / "a" / "g.sock", 0.003, tmp_path / "a.jsonl")
    rich = gateway.open_channel("rich", tmp_path / "b" / "g.sock", 1.0, tmp_path / "b.jsonl")
    with uds_client(poor.socket_path) as a, uds_client(rich.socket_path) as b:
        assert a.post("/v1/messages", json=BODY).status_code == 200
        refused = a.post("/v1/messages", json=BODY, headers={"x-case": "rich"})
        assert b.post("/v1/messages", json=BODY).status_code == 200
    gateway.close()
    assert refused.status_code == 402 and refused.headers["x-should-retry"] == "false"
    assert refused.json()["error"]["type"] == "billing_error"
    assert (poor.refused, rich.refused) == (1, 0)
    assert poor.spent_usd == rich.spent_usd == pytest.approx(0.0045)
    assert {r["case_id"] for r in read_log(tmp_path / "a.jsonl")} == {"poor"}
    assert {r["case_id"] for r in read_log(tmp_path / "b.jsonl")} == {"rich"}


def test_a_channel_replaces_a_stale_socket_and_removes_its_own(gateway, tmp_path):
    path = tmp_path / "g.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    channel = gateway.open_channel("c", path, 1.0, tmp_path / "log.jsonl")
    assert path.stat().st_mode & 0o777 == 0o666
    with uds_client(path) as client:
        assert client.head("/").status_code == 200
    channel.close()
    channel.close()
    assert not path.exists()


class _SlowStreamUpstream(BaseHTTPRequestHandler):
    """Sends message_start, then holds the rest until the test says so (or breaks off)."""

    protocol_version = "HTTP/1.1"
    release: threading.Event
    break_off: bool
    gave_up_waiting: bool | None = None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        message = {
            "id": "msg_1",
            "model": "claude-sonnet-4-5",
            "role": "assistant",
            "type": "message",
            "content": [{"type": "text", "text": "slow"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }
        events = message_events(message)
        self._chunk(encode_event(*events[0]))
        if self.break_off:
            self.close_connection = True
            return  # no terminating chunk: a broken stream
        type(self).gave_up_waiting = not self.release.wait(5)
        for event in events[1:]:
            self._chunk(encode_event(*event))
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_upstream() -> Iterator[tuple[str, type[_SlowStreamUpstream]]]:
    handler = type("Handler", (_SlowStreamUpstream,), {"release": threading.Event(), "break_off": False})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    handler.release.set()
    server.shutdown()
    server.server_close()


def test_streams_are_relayed_as_they_arrive(slow_upstream, tmp_path, read_log):
    url, handler = slow_upstream
    with ModelGateway(url, Credentials(api_key=SECRET)) as gateway:
        channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
        decoder, names = SSEDecoder(), []
        with (
            uds_client(channel.socket_path) as client,
            client.stream("POST", "/v1/messages", json={**BODY, "stream": True}) as response,
        ):
            assert response.headers["transfer-encoding"] == "chunked"
            for chunk in response.iter_raw():
                names += [name for name, _ in decoder.feed(chunk)]
                # The upstream holds everything after message_start until this
                # event: through a buffering gateway it would have to give up waiting.
                if names == ["message_start"]:
                    handler.release.set()
        assert handler.gave_up_waiting is False
        assert names[0] == "message_start" and names[-1] == "message_stop"
        channel.close()
    record = read_log(tmp_path / "log.jsonl")[0]
    assert record["response"]["message"]["content"] == [{"type": "text", "text": "slow"}]
    assert record["usage"]["output_tokens"] == 10 and record["outcome"] == "forwarded"


def test_a_stream_that_breaks_off_ends_with_an_error_event(slow_upstream, tmp_path, read_log):
    url, handler = slow_upstream
    handler.break_off = True
    with ModelGateway(url, Credentials(api_key=SECRET)) as gateway:
        channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
        with (
            uds_client(channel.socket_path) as client,
            client.stream("POST", "/v1/messages", json={**BODY, "stream": True}) as response,
        ):
            events = SSEDecoder().feed(response.read())
        channel.close()
    assert [name for name, _ in events] == ["message_start", "error"]
    assert events[1][1]["error"]["type"] == "api_error"
    record = read_log(tmp_path / "log.jsonl")[0]
    assert record["outcome"] == "upstream_error" and "stream broke" in record["error"]
    # What was seen is still charged: the input side from message_start.
    assert record["usage"]["input_tokens"] == 100


def test_request_bodies_must_have_a_length(gateway, tmp_path, read_log):
    channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
    reply = _raw_request(
        channel.socket_path,
        b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 411")
    channel.close()
    assert read_log(tmp_path / "log.jsonl")[0]["outcome"] == "bad_request"


def test_log_records_are_complete_json(gateway, tmp_path, read_log):
    channel = gateway.open_channel("case-7", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
    with uds_client(channel.socket_path) as client:
        client.post(
            "/v1/messages?beta=true", json=BODY, headers={"x-api-key": "placeholder", "anthropic-version": "2023-06-01"}
        )
    channel.close()
    record = read_log(tmp_path / "log.jsonl")[0]
    assert set(record) >= {
        "time",
        "case_id",
        "method",
        "path",
        "status",
        "outcome",
        "duration_ms",
        "request_headers",
        "request",
        "response",
        "model",
        "usage",
        "cost_usd",
        "spent_usd",
        "refused",
        "price_note",
        "error",
    }
    assert record["case_id"] == "case-7" and record["path"] == "/v1/messages?beta=true"
    assert record["request"] == BODY and record["request_headers"]["x-api-key"] == "[redacted]"
    assert json.dumps(record).count(SECRET) == 0


def test_a_connection_that_outlives_its_channel_gets_nothing_through(gateway, scripted, tmp_path):
    channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
    with uds_client(channel.socket_path) as client:
        assert client.post("/v1/messages", json=BODY).status_code == 200
        channel.close()
        # Its keep-alive connection was dropped with the channel, and the socket is gone.
        with pytest.raises(httpx.ConnectError):
            client.post("/v1/messages", json=BODY)
    assert len(scripted.requests) == 1


def test_a_loopback_upstream_ignores_proxy_settings(scripted, tmp_path, monkeypatch):
    # An offline run on a machine with a proxy configured must still reach its scripted server.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:1")
    with ModelGateway(scripted.url, Credentials(api_key=SECRET)) as gateway:
        channel = gateway.open_channel("c", tmp_path / "g.sock", 1.0, tmp_path / "log.jsonl")
        with uds_client(channel.socket_path) as client:
            assert client.post("/v1/messages", json=BODY).status_code == 200


def test_a_case_cannot_hold_more_than_a_few_requests_in_flight(tmp_path):
    """Each request body is held in memory: the number a case may have open at once is capped."""
    slow = parse_script({"advance": "per_request",
                         "steps": [{"text": "slow", "delay_s": 2.0} for _ in range(20)]})
    with ScriptedModelServer(slow) as upstream, ModelGateway(upstream.url, Credentials(api_key=SECRET)) as gateway:
        channel = gateway.open_channel("c", tmp_path / "s" / "g.sock", 10.0, tmp_path / "log.jsonl")
        statuses: list[int] = []

        def post() -> None:
            with uds_client(channel.socket_path) as client:
                statuses.append(client.post("/v1/messages", json=BODY).status_code)

        threads = [threading.Thread(target=post) for _ in range(14)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        channel.close()
    assert sorted(set(statuses)) == [200, 429], statuses
    assert statuses.count(200) <= 9 and len(statuses) == 14
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert sum(entry["outcome"] == "too_many_requests" for entry in log) == statuses.count(429)


def test_a_case_sending_costly_requests_gets_only_its_share_of_the_controllers_cpu(tmp_path):
    """Found by a red team: requests of tens of MB of tiny JSON objects (refused, but parsed first)
    had the controller spend a core on one case, outside its sandbox's CPU limit; its neighbours
    ran 2.3-3.4 times slower, one past its deadline. The case's requests now wait for its share."""
    costly = (b'{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],'
              b'"metadata":{"x":[' + b",".join([b'{"a":0}'] * 300_000) + b"]}}")
    with ScriptedModelServer(parse_script([{"text": "ok"}])) as upstream, \
            ModelGateway(upstream.url, Credentials(api_key=SECRET)) as gateway:
        channel = gateway.open_channel("c", tmp_path / "s" / "g.sock", 10.0, tmp_path / "log.jsonl")
        share = channel.cpu_share = CpuShare(rate=0.25, burst_s=0.2)
        started = time.monotonic()
        with uds_client(channel.socket_path) as client:
            statuses = [client.post("/v1/messages", content=costly, headers={"content-type": "application/json"},
                                    timeout=60).status_code for _ in range(8)]
        wall = time.monotonic() - started
        channel.close()
    assert len(statuses) == 8 and set(statuses) <= {200, 402}, statuses  # each answered (then the budget refused)
    each = share.charged_s / 8
    assert each > 0.05, each  # costly indeed: else this proves nothing
    # Its share: the burst, the rate over the time it took, and the one request that may overdraw.
    assert share.charged_s <= share.burst_s + share.rate * wall + 2 * each, (share.charged_s, wall)
    assert share.waited_s > 0
