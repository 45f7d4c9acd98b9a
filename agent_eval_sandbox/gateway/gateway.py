"""The host-side model gateway: the only way a container reaches a model.

Each case gets a channel: a unix socket whose directory is bind-mounted into
that case's container (which has no network). The case is known by the socket
a request came in on, never by anything in the request. A channel forwards
model requests upstream with the host's credentials (the container only ever
has a placeholder), relays streams as they arrive, charges what the responses
report against the case's budget, refuses requests once it is spent, and logs
every exchange.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socketserver
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.api_errors import error_body
from agent_eval_sandbox.gateway.budget import BudgetDecision, decide
from agent_eval_sandbox.gateway.credentials import Credentials, checked_upstream_url
from agent_eval_sandbox.gateway.http11 import BodyError, MessagesApiHandler
from agent_eval_sandbox.gateway.conversation import ConversationRecord
from agent_eval_sandbox.gateway.pricing import cost_usd, price_for
from agent_eval_sandbox.gateway.request_log import (
    LogRecord,
    Outcome,
    RequestLog,
    parse_body,
    redact_headers,
)
from agent_eval_sandbox.gateway.routes import Route, classify, split_target
from agent_eval_sandbox.gateway.sse import MessageAssembler, SSEDecoder, encode_event
from agent_eval_sandbox.gateway.usage import Usage, usage_from_api
from agent_eval_sandbox.unix_socket import prepare_socket_path

log = logging.getLogger(__name__)

# 402 billing_error: measured with CLI 2.1.332, it is not retried and the run
# ends at once with "API Error: 402 <message>" (400 is retried 6 times with
# other request variants, 429/5xx with backoff, and 403 is reported as
# "Failed to authenticate"). `x-should-retry: false` tells SDK clients the same.
BUDGET_REFUSAL_STATUS = 402
BUDGET_REFUSAL_HEADERS = (("x-should-retry", "false"),)

FORWARDED_HEADERS = frozenset(
    {"anthropic-version", "anthropic-beta", "content-type", "accept", "user-agent", "x-app", "x-claude-code-session-id"}
)
FORWARDED_HEADER_PREFIXES = ("x-stainless-",)
# Hop-by-hop headers, framing we redo ourselves, and what the container has no use for.
DROPPED_RESPONSE_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "content-length",
        "content-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authenticate",
        "proxy-connection",
        "set-cookie",
        "server",
        "date",
    }
)
# sun_path is 108 bytes including the terminating NUL.
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=120.0, pool=30.0)
# A refused request is logged with at most this much of its body (a size and a preview beyond).
REFUSED_BODY_LOG_BYTES = 64 * 1024
# Requests a case may have in flight at once (its CLI and subagents need a few):
# bounds the controller's memory to about this many request bodies per case.
MAX_CONCURRENT_REQUESTS = 8
MAX_LOGGED_REQUEST_LINE = 512


def upstream_headers(incoming: Iterable[tuple[str, str]], credentials: Credentials) -> dict[str, str]:
    """Headers sent upstream: an allowlist of the client's, then the host's credentials.

    Whatever auth the client sent is dropped by not being on the allowlist.
    """
    headers = {
        name.lower(): value
        for name, value in incoming
        if name.lower() in FORWARDED_HEADERS or name.lower().startswith(FORWARDED_HEADER_PREFIXES)
    }
    # Identity encoding keeps relayed bytes parseable for accounting as they pass.
    headers["accept-encoding"] = "identity"
    headers.update(credentials.headers())
    return headers


def client_headers(upstream: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in upstream if name.lower() not in DROPPED_RESPONSE_HEADERS]


@dataclass
class _Exchange:
    """One request as it unfolds; becomes a LogRecord when it is over."""

    method: str
    path: str
    request_headers: dict[str, str]
    timestamp: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    started: float = field(default_factory=time.monotonic)
    status: int | None = None
    outcome: Outcome = "internal_error"
    request: Any = None
    response: Any = None
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float = 0.0
    refused: bool = False
    price_note: str | None = None
    error: str | None = None


class _GatewayHandler(MessagesApiHandler):
    server: _ChannelServer

    def _dispatch(self) -> None:
        channel = self.server.channel
        exchange = _Exchange(self.command, self.path, redact_headers(self.headers.items()))
        self.response_status = None
        channel.begin()
        try:
            self._handle(channel, exchange)
        except (ConnectionError, TimeoutError) as exc:
            exchange.outcome, exchange.error = "client_disconnected", f"{type(exc).__name__}: {exc}"
            self.close_connection = True
        except Exception as exc:  # one bad request must never take the gateway down
            log.exception("model gateway: case %s: %s %s failed", channel.case_id, self.command, self.path)
            exchange.outcome, exchange.error = "internal_error", f"{type(exc).__name__}: {exc}"
            self.close_connection = True
            if self.response_status is None:
                exchange.status = 500
                with contextlib.suppress(OSError):
                    self.send_api_error(500, "api_error", "model gateway: internal error (see the case's gateway log)")
        finally:
            channel.finish(exchange)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_CONNECT = _dispatch

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Requests the HTTP parser refuses (not HTTP, an unknown method, oversized
        headers) never reach `_dispatch`; they are logged here, like every other."""
        channel = self.server.channel
        line = self.raw_requestline[:MAX_LOGGED_REQUEST_LINE].decode("iso-8859-1").rstrip("\r\n")
        exchange = _Exchange(self.command or "-", line, {})
        exchange.status, exchange.outcome = code, "bad_request"
        exchange.error = f"not a valid HTTP request: {message or code}"
        channel.begin()
        try:
            super().send_error(code, message, explain)
        finally:
            channel.finish(exchange)

    def _handle(self, channel: Channel, exchange: _Exchange) -> None:
        if channel.closed:
            # A keep-alive connection outliving its case: nothing more goes through.
            self.close_connection = True
            exchange.status, exchange.outcome = 503, "channel_closed"
            self.send_api_error(503, "api_error", "model gateway: this case's channel is closed")
            return
        if channel.in_flight > MAX_CONCURRENT_REQUESTS:
            self.close_connection = True
            exchange.status, exchange.outcome = 429, "too_many_requests"
            self.send_api_error(429, "rate_limit_error",
                                f"model gateway: more than {MAX_CONCURRENT_REQUESTS} requests at once from this case")
            return
        try:
            raw = self.read_body()
        except BodyError as exc:
            self.close_connection = True
            exchange.status, exchange.outcome, exchange.error = exc.status, "bad_request", exc.message
            self.send_api_error(exc.status, "invalid_request_error", f"model gateway: {exc.message}")
            return
        route = classify(self.command, self.path)
        exchange.request = parse_body(raw, limit=REFUSED_BODY_LOG_BYTES if route is Route.OTHER else None)
        if route is Route.OTHER:
            exchange.status, exchange.outcome = 403, "forbidden"
            self.send_api_error(
                403,
                "permission_error",
                f"model gateway: {self.command} {self.path} is not allowed; this channel carries model requests only",
            )
        elif route is Route.PROBE:
            exchange.status, exchange.outcome = 200, "local"
            self.send_json(200, {"status": "ok"})
        else:
            decision = channel.admit()
            if decision.allowed:
                self._forward(channel, raw, exchange)
            else:
                self._refuse(decision, exchange)

    def _refuse(self, decision: BudgetDecision, exchange: _Exchange) -> None:
        exchange.status, exchange.outcome, exchange.refused = BUDGET_REFUSAL_STATUS, "over_budget", True
        exchange.response = self.send_api_error(
            BUDGET_REFUSAL_STATUS, "billing_error", decision.reason or "budget exhausted", BUDGET_REFUSAL_HEADERS
        )

    def _forward(self, channel: Channel, raw: bytes, exchange: _Exchange) -> None:
        split = split_target(self.path)
        assert split is not None  # classify() let only origin-form targets through
        path, query = split
        url = channel.upstream_url + path + (f"?{query}" if query else "")
        request = channel.client.build_request(
            self.command, url, headers=upstream_headers(self.headers.items(), channel.credentials), content=raw
        )
        if isinstance(exchange.request, dict) and isinstance(exchange.request.get("model"), str):
            exchange.model = exchange.request["model"]
        channel.conversation.record_request(exchange.request, dict(self.headers.items()))
        try:
            response = channel.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self._bad_gateway(channel, exchange, exc)
            return
        try:
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                self._relay_stream(channel, response, exchange)
            else:
                self._relay_body(channel, response, exchange)
        finally:
            response.close()

    # Both relays charge a response *before* passing on its last bytes: a
    # client's next request must find the new spend already on the books.

    def _relay_body(self, channel: Channel, response: httpx.Response, exchange: _Exchange) -> None:
        try:
            body = response.read()
        except httpx.HTTPError as exc:
            self._bad_gateway(channel, exchange, exc)
            return
        exchange.status, exchange.outcome = response.status_code, "forwarded"
        exchange.response = parse_body(body)
        if response.status_code == 200:
            channel.conversation.record_response(exchange.response)
        if isinstance(exchange.response, dict) and "usage" in exchange.response:
            channel.charge(exchange, usage_from_api(exchange.response["usage"]), exchange.response.get("model"))
        self.send_response(response.status_code)
        for name, value in client_headers(response.headers.multi_items()):
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _relay_stream(self, channel: Channel, response: httpx.Response, exchange: _Exchange) -> None:
        """Pass each chunk on as it arrives, decoding a copy for the log and the bill."""
        decoder, assembler = SSEDecoder(), MessageAssembler()
        exchange.status, exchange.outcome = response.status_code, "forwarded"
        self.start_chunked(response.status_code, client_headers(response.headers.multi_items()))
        try:
            for chunk in response.iter_bytes():
                for event in decoder.feed(chunk):
                    assembler.feed(event)
                if assembler.usage_final and exchange.usage is None:
                    channel.charge(exchange, assembler.usage, assembler.message.get("model"))
                self.write_chunk(chunk)
            self.end_chunked()
        except httpx.HTTPError as exc:
            # Too late for an HTTP status: end the stream with an API error event.
            exchange.outcome, exchange.error = "upstream_error", f"stream broke: {type(exc).__name__}: {exc}"
            self.close_connection = True
            self.write_chunk(
                encode_event("error", error_body("api_error", "model gateway: the upstream stream broke off"))
            )
            self.end_chunked()
        except (ConnectionError, TimeoutError) as exc:
            exchange.outcome, exchange.error = "client_disconnected", f"{type(exc).__name__}: {exc}"
            self.close_connection = True
        finally:
            if response.status_code == 200:
                channel.conversation.record_response(assembler.message)
            exchange.response = {
                "stream": True,
                "events": assembler.event_count,
                "message": assembler.message,
                "error": assembler.error,
            }
            # A stream cut short is still billed for what it reported.
            if assembler.message and exchange.usage is None:
                channel.charge(exchange, assembler.usage, assembler.message.get("model"))

    def _bad_gateway(self, channel: Channel, exchange: _Exchange, exc: httpx.HTTPError) -> None:
        exchange.status, exchange.outcome = 502, "upstream_error"
        exchange.error = f"upstream {channel.upstream_url}: {type(exc).__name__}: {exc}"
        # The client learns the kind of failure only; details stay in the host-side log.
        exchange.response = self.send_api_error(
            502, "api_error", f"model gateway: the model API could not be reached ({type(exc).__name__})"
        )


class _ChannelServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    # An agent with parallel subagents opens several connections at once.
    request_queue_size = 64

    def __init__(self, path: str, channel: Channel) -> None:
        self.channel = channel
        super().__init__(path, _GatewayHandler)

    def handle_error(self, request: object, client_address: object) -> None:
        # Errors inside a request are handled and logged by the handler; what
        # arrives here is a connection dropped between requests.
        log.debug("model gateway: case %s: connection error", self.channel.case_id, exc_info=True)


class Channel:
    """One case's way to the model: a unix socket, a budget and a request log.

    A request's log record is written once its response is over: read the log
    (and the final spend) after close(), which waits for requests in flight.
    """

    def __init__(
        self,
        case_id: str,
        socket_path: Path,
        budget_usd: float,
        log_path: Path,
        *,
        upstream_url: str,
        credentials: Credentials,
        client: httpx.Client,
    ) -> None:
        if budget_usd < 0:
            raise ValueError(f"budget_usd must be >= 0, not {budget_usd}")
        self.case_id = case_id
        self.socket_path = socket_path
        self.budget_usd = budget_usd
        self.log_path = log_path
        self.upstream_url = checked_upstream_url(upstream_url)
        self.credentials = credentials
        self.client = client
        # What the model really said, on the host's side: the collected stream is checked against it.
        self.conversation = ConversationRecord()
        self._lock = threading.Condition()
        self._spent_usd = 0.0
        self._usage = Usage()
        self._requests = 0
        self._refused = 0
        self._forbidden = 0
        self._in_flight = 0
        self._closed = False
        self._log: RequestLog | None = None
        self._server: _ChannelServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Channel:
        """Create the socket (mode 0666: the container's user is not ours) and serve it."""
        prepare_socket_path(self.socket_path, "gateway")
        try:
            self._server = _ChannelServer(str(self.socket_path), self)
        except OSError as exc:
            raise UserError(
                f"cannot create the gateway socket {self.socket_path}: {exc.strerror or exc}",
                fix="check that its directory is writable",
            ) from exc
        os.chmod(self.socket_path, 0o666)
        self._log = RequestLog(self.log_path, secrets=self.credentials.secrets)
        # A short poll interval keeps close() quick; the loop is idle otherwise.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name=f"gateway-{self.case_id}", daemon=True
        )
        self._thread.start()
        return self

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent_usd

    @property
    def usage(self) -> Usage:
        with self._lock:
            return self._usage

    @property
    def requests(self) -> int:
        """Requests received, of every kind."""
        with self._lock:
            return self._requests

    @property
    def refused(self) -> int:
        """Requests refused because the budget was spent."""
        with self._lock:
            return self._refused

    @property
    def forbidden(self) -> int:
        """Requests for anything but the model endpoints."""
        with self._lock:
            return self._forbidden

    @property
    def in_flight(self) -> int:
        """Requests being handled right now (including the caller's)."""
        with self._lock:
            return self._in_flight

    def admit(self) -> BudgetDecision:
        with self._lock:
            return decide(self._spent_usd, self.budget_usd)

    def begin(self) -> None:
        with self._lock:
            self._in_flight += 1

    def charge(self, exchange: _Exchange, usage: Usage, response_model: Any) -> None:
        """Bill one response, priced by the model that answered (else the one asked for)."""
        model = response_model if isinstance(response_model, str) and response_model else exchange.model
        lookup = price_for(model)
        exchange.usage, exchange.model = usage, model
        exchange.cost_usd = cost_usd(usage, lookup.price)
        exchange.price_note = lookup.note(model)
        with self._lock:
            self._spent_usd += exchange.cost_usd
            self._usage += usage

    def finish(self, exchange: _Exchange) -> None:
        with self._lock:
            self._requests += 1
            self._refused += exchange.refused
            self._forbidden += exchange.outcome == "forbidden"
            spent = self._spent_usd
        record = LogRecord(
            time=exchange.timestamp,
            case_id=self.case_id,
            method=exchange.method,
            path=exchange.path,
            status=exchange.status,
            outcome=exchange.outcome,
            duration_ms=round((time.monotonic() - exchange.started) * 1000),
            request_headers=exchange.request_headers,
            request=exchange.request,
            response=exchange.response,
            model=exchange.model,
            usage=exchange.usage.model_dump() if exchange.usage else None,
            cost_usd=exchange.cost_usd,
            spent_usd=spent,
            refused=exchange.refused,
            price_note=exchange.price_note,
            error=exchange.error,
        )
        try:
            if self._log is not None:
                self._log.write(record)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def close(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let requests in flight finish (up to `grace_s`), remove the socket."""
        with self._lock:
            server, self._server = self._server, None
            self._closed = True
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self._lock.wait_for(lambda: self._in_flight == 0, timeout=grace_s)
        if self._log is not None:
            self._log.close()
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ModelGateway:
    """Holds the upstream, the credentials and one HTTP client; opens a channel per case.

    with ModelGateway(upstream_url_from_env(os.environ), Credentials.from_env(os.environ)) as gateway:
        channel = gateway.open_channel(case.id, sock, case.max_budget_usd, case_dir / "gateway.jsonl")
        ...  # run the case with sock's directory mounted read-only
        channel.close()
    """

    def __init__(
        self,
        upstream_url: str,
        credentials: Credentials,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        self.upstream_url = checked_upstream_url(upstream_url)
        self.credentials = credentials
        # Proxies from the environment (HTTPS_PROXY...) apply to a remote
        # upstream, but a loopback one (offline runs) must never go through them.
        loopback = {f"all://{host}": httpx.HTTPTransport() for host in ("127.0.0.1", "localhost", "[::1]")}
        self._client = httpx.Client(timeout=timeout, follow_redirects=False, mounts=loopback)
        self._channels: list[Channel] = []
        self._lock = threading.Lock()

    def open_channel(
        self,
        case_id: str,
        socket_path: Path | str,
        budget_usd: float,
        log_path: Path | str,
        *,
        upstream_url: str | None = None,
    ) -> Channel:
        """Serve a case on `socket_path`; `upstream_url` overrides the gateway's for this
        case (offline runs give each case its own scripted server)."""
        channel = Channel(
            case_id,
            Path(socket_path),
            budget_usd,
            Path(log_path),
            upstream_url=upstream_url or self.upstream_url,
            credentials=self.credentials,
            client=self._client,
        ).start()
        with self._lock:
            self._channels.append(channel)
        return channel

    def close(self) -> None:
        with self._lock:
            channels, self._channels = self._channels, []
        for channel in channels:
            channel.close()
        self._client.close()

    def __enter__(self) -> ModelGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
