"""The host-side model gateway: the only way a container reaches a model.

Each case gets a channel: a unix socket whose directory is bind-mounted into
that case's container (which has no network). The case is known by the socket
a request came in on, never by anything in the request. A channel checks each
model request against the eval's policy (policy.py: configured models only,
no server-side reach), reserves its worst case against what is left of the
case's budget and lowers its max_tokens to fit (budget.py), forwards it
upstream with the host's credentials (the container only ever has a
placeholder), relays streams as they arrive, replaces the reservation by what
the response reports (a stream cut short by bound, see `_charge_cut_short`),
and logs every exchange; a channel given a cassette path also records what it
forwards, for replay (cassette.py). It holds at most a few of a case's connections and
requests at once, and closes idle connections.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import socketserver
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import httpx

from agent_eval_sandbox.cpu_share import CpuShare
from agent_eval_sandbox.gateway.api_errors import error_body
from agent_eval_sandbox.gateway.budget import BYTES_PER_TOKEN, Admission, limited_body
from agent_eval_sandbox.gateway.cassette import NO_TAPE, CassetteRecorder, Tape
from agent_eval_sandbox.gateway.conversation import ConversationRecord
from agent_eval_sandbox.gateway.credentials import Credentials, checked_upstream_url
from agent_eval_sandbox.gateway.http11 import BodyError, MessagesApiHandler
from agent_eval_sandbox.gateway.ledger import Ledger, Reservation
from agent_eval_sandbox.gateway.policy import (
    GatewayPolicy,
    Refusal,
    check_request,
    filter_betas,
)
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
from agent_eval_sandbox.unix_socket import LOGGED_REFUSED_CONNECTIONS, CappedUnixServer, UnixSocketService

log = logging.getLogger(__name__)

# 402 billing_error: measured with CLI 2.1.332, it is not retried and the run
# ends at once with "API Error: 402 <message>" (400 is retried 6 times with
# other request variants, 429/5xx with backoff, and 403 is reported as
# "Failed to authenticate"). `x-should-retry: false` tells SDK clients the same.
BUDGET_REFUSAL_STATUS = 402
BUDGET_REFUSAL_HEADERS = (("x-should-retry", "false"),)
# What the policy refuses is an invalid request, and 400 is how the CLI reports
# it clearly: measured with 2.1.332, it tries 6 times within a second, then ends
# with "API Error: 400 <message>" (a 403 reads "Failed to authenticate", a 404
# "There's an issue with the selected model", without our message).
POLICY_REFUSAL_STATUS = 400

FORWARDED_HEADERS = frozenset(
    {"anthropic-version", "content-type", "accept", "user-agent", "x-app", "x-claude-code-session-id"}
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
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=120.0, pool=30.0)
# A refused request is logged with at most this much of its body (a size and a preview beyond).
REFUSED_BODY_LOG_BYTES = 64 * 1024
# Requests a case may have in flight at once (its CLI and subagents need a few):
# bounds the controller's memory to about this many request bodies per case.
MAX_CONCURRENT_REQUESTS = 8
# Connections a case may hold open at once, idle or not; more are closed at once,
# without a thread. The CLI keeps a few (one per concurrent request at most).
MAX_CONNECTIONS = 32
# A keep-alive connection idle this long is closed (the CLI opens another when
# it needs one); so is one that sends nothing of a request for this long.
IDLE_TIMEOUT_S = 60.0
MAX_LOGGED_REQUEST_LINE = 512
OPEN_POLICY = GatewayPolicy()


def upstream_headers(
    incoming: Iterable[tuple[str, str]], credentials: Credentials, policy: GatewayPolicy = OPEN_POLICY
) -> tuple[dict[str, str], list[str]]:
    """Headers sent upstream (an allowlist of the client's, then the host's credentials), and the betas dropped.

    Whatever auth the client sent is dropped by not being on the allowlist;
    `anthropic-beta` passes minus the betas the policy does not allow.
    """
    incoming = list(incoming)
    headers = {
        name.lower(): value
        for name, value in incoming
        if name.lower() in FORWARDED_HEADERS or name.lower().startswith(FORWARDED_HEADER_PREFIXES)
    }
    beta, dropped = filter_betas([value for name, value in incoming if name.lower() == "anthropic-beta"], policy)
    if beta:
        headers["anthropic-beta"] = beta
    # Identity encoding keeps relayed bytes parseable for accounting as they pass.
    headers["accept-encoding"] = "identity"
    headers.update(credentials.headers())
    return headers, dropped


def client_headers(upstream: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in upstream if name.lower() not in DROPPED_RESPONSE_HEADERS]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class _Exchange:
    """One request as it unfolds; becomes a LogRecord when it is over."""

    method: str
    path: str
    request_headers: dict[str, str]
    timestamp: str = field(default_factory=_now)
    started: float = field(default_factory=time.monotonic)
    status: int | None = None
    outcome: Outcome = "internal_error"
    request: Any = None
    response: Any = None
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float = 0.0
    reservation: Reservation | None = None
    max_tokens_lowered_from: int | None = None
    betas_dropped: list[str] | None = None
    refused: bool = False
    price_note: str | None = None
    charge_note: str | None = None
    error: str | None = None
    tape: Tape = NO_TAPE  # the cassette's record of it, when the channel records


class DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKeyError(key)
        found[key] = value
    return found


def strict_json(raw: bytes) -> Any:
    """A request body as the gateway reads it: UTF-8 JSON in which no object names a key twice."""
    return json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)


class _GatewayHandler(MessagesApiHandler):
    server: CappedUnixServer[Channel]

    def setup(self) -> None:
        super().setup()
        # The channel's idle timeout instead of the class-wide one.
        self.connection.settimeout(self.server.service.idle_timeout_s)

    def _dispatch(self) -> None:
        channel = self.server.service
        exchange = _Exchange(self.command, self.path, redact_headers(self.headers.items()))
        self.response_status = None
        with channel.request_in_flight():
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
                        self.send_api_error(500, "api_error",
                                            "model gateway: internal error (see the case's gateway log)")
            finally:
                channel.record_exchange(exchange)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_CONNECT = _dispatch

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Requests the HTTP parser refuses (not HTTP, an unknown method, oversized
        headers) never reach `_dispatch`; they are logged here, like every other."""
        channel = self.server.service
        line = self.raw_requestline[:MAX_LOGGED_REQUEST_LINE].decode("iso-8859-1").rstrip("\r\n")
        exchange = _Exchange(self.command or "-", line, {})
        exchange.status, exchange.outcome = code, "bad_request"
        exchange.error = f"not a valid HTTP request: {message or code}"
        with channel.request_in_flight():
            try:
                super().send_error(code, message, explain)
            finally:
                channel.record_exchange(exchange)

    def _handle(self, channel: Channel, exchange: _Exchange) -> None:
        if channel.in_flight > MAX_CONCURRENT_REQUESTS:
            self.close_connection = True
            exchange.status, exchange.outcome = 429, "too_many_requests"
            self.send_api_error(429, "rate_limit_error",
                                f"model gateway: more than {MAX_CONCURRENT_REQUESTS} requests at once from this case")
            return
        route = classify(self.command, self.path)
        # Reading and parsing the body is the controller's CPU: the case's share of it.
        with channel.charged():
            try:
                raw = self.read_body() if not channel.closed else None
            except BodyError as exc:
                self.close_connection = True
                exchange.status, exchange.outcome, exchange.error = exc.status, "bad_request", exc.message
                self.send_api_error(exc.status, "invalid_request_error", f"model gateway: {exc.message}")
                return
            parsed = _parsed(raw) if raw is not None and route in (Route.MESSAGES, Route.COUNT_TOKENS) else None
        if raw is None:
            # A keep-alive connection outliving its case (or closed while it waited for its share):
            # nothing more goes through.
            self.close_connection = True
            exchange.status, exchange.outcome = 503, "channel_closed"
            self.send_api_error(503, "api_error", "model gateway: this case's channel is closed")
            return
        if route is Route.OTHER:
            exchange.request = parse_body(raw, limit=REFUSED_BODY_LOG_BYTES)
            exchange.status, exchange.outcome = 403, "forbidden"
            self.send_api_error(
                403,
                "permission_error",
                f"model gateway: {self.command} {self.path} is not allowed; this channel carries model requests only",
            )
        elif route is Route.PROBE:
            exchange.request = parse_body(raw, limit=REFUSED_BODY_LOG_BYTES)
            exchange.status, exchange.outcome = 200, "local"
            self.send_json(200, {"status": "ok"})
        else:
            assert parsed is not None
            self._model_request(channel, route, raw, parsed, exchange)

    def _model_request(self, channel: Channel, route: Route, raw: bytes, parsed: tuple[Any, Refusal | None],
                       exchange: _Exchange) -> None:
        body, refusal = parsed
        if refusal is not None:
            exchange.request = parse_body(raw, limit=REFUSED_BODY_LOG_BYTES)
        else:
            exchange.request = body
            refusal = check_request(body, channel.policy, generates=route is Route.MESSAGES)
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            exchange.model = body["model"]
        if refusal is not None:
            exchange.status, exchange.outcome, exchange.error = POLICY_REFUSAL_STATUS, "policy_refused", refusal.message
            exchange.request = _as_refused(raw, exchange.request)
            self.send_api_error(POLICY_REFUSAL_STATUS, "invalid_request_error", f"model gateway: {refusal.message}")
            return
        # What goes upstream is the object that was checked, written anew: never bytes that
        # another parser might read differently (a key given twice, another encoding).
        checked = json.dumps(body, separators=(",", ":")).encode()
        if route is Route.COUNT_TOKENS:
            self._forward(channel, checked, exchange)  # not billed: nothing to reserve
            return
        admission, exchange.reservation = channel.admit(body, max(len(raw), len(checked)))
        if exchange.reservation is None:
            exchange.request = _as_refused(raw, exchange.request)
            self._refuse(admission, exchange)
            return
        if admission.lowered_from is not None:
            body = limited_body(body, admission)
            checked = json.dumps(body, separators=(",", ":")).encode()
            exchange.request, exchange.max_tokens_lowered_from = body, admission.lowered_from
        self._forward(channel, checked, exchange)

    def _refuse(self, admission: Admission, exchange: _Exchange) -> None:
        exchange.status, exchange.outcome, exchange.refused = BUDGET_REFUSAL_STATUS, "over_budget", True
        exchange.response = self.send_api_error(
            BUDGET_REFUSAL_STATUS, "billing_error", admission.refusal or "budget exhausted", BUDGET_REFUSAL_HEADERS
        )

    def _forward(self, channel: Channel, raw: bytes, exchange: _Exchange) -> None:
        split = split_target(self.path)
        assert split is not None  # classify() let only origin-form targets through
        path, query = split
        url = channel.upstream_url + path + (f"?{query}" if query else "")
        headers, dropped = upstream_headers(self.headers.items(), channel.credentials, channel.policy)
        exchange.betas_dropped = dropped or None
        request = channel.client.build_request(self.command, url, headers=headers, content=raw)
        channel.conversation.record_request(exchange.request, dict(self.headers.items()))
        if channel.recorder is not None:
            exchange.tape = channel.recorder.begin(self.command, self.path, self.headers.items(), exchange.request)
        try:
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
        finally:
            # Whatever was not charged by now was not billed: an unreachable
            # upstream, an error response, a body that broke off (as before reservations).
            channel.release(exchange)
            exchange.tape.finish(exchange.outcome, exchange.error)

    # Both relays charge a response *before* passing on its last bytes: a
    # client's next request must find the new spend already on the books.

    def _relay_body(self, channel: Channel, response: httpx.Response, exchange: _Exchange) -> None:
        try:
            body = response.read()
        except httpx.HTTPError as exc:
            self._bad_gateway(channel, exchange, exc)
            return
        exchange.status, exchange.outcome = response.status_code, "forwarded"
        exchange.tape.respond(response.status_code, response.headers.multi_items(), body)
        exchange.response = parse_body(body)
        if response.status_code == 200:
            channel.conversation.record_response(exchange.response, dict(self.headers.items()))
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
        client_gone = False
        try:
            exchange.tape.respond(response.status_code, response.headers.multi_items())
            self.start_chunked(response.status_code, client_headers(response.headers.multi_items()))
            try:
                for chunk in response.iter_bytes():
                    for event in decoder.feed(chunk):
                        assembler.feed(event)
                    if assembler.usage_final and exchange.usage is None:
                        channel.charge(exchange, assembler.usage, assembler.message.get("model"))
                    exchange.tape.chunk(chunk)
                    self.write_chunk(chunk)
                self.end_chunked()
            except httpx.HTTPError as exc:
                # Too late for an HTTP status: end the stream with an API error event.
                exchange.outcome, exchange.error = "upstream_error", f"stream broke: {type(exc).__name__}: {exc}"
                self.close_connection = True
                broke = encode_event("error", error_body("api_error", "model gateway: the upstream stream broke off"))
                exchange.tape.chunk(broke)
                self.write_chunk(broke)
                self.end_chunked()
        except (ConnectionError, TimeoutError) as exc:
            # The client hung up, or stopped reading for the idle timeout.
            client_gone = True
            exchange.outcome, exchange.error = "client_disconnected", f"{type(exc).__name__}: {exc}"
            self.close_connection = True
        finally:
            if response.status_code == 200:
                channel.conversation.record_response(assembler.message, dict(self.headers.items()))
            exchange.response = {
                "stream": True,
                "events": assembler.event_count,
                "message": assembler.message,
                "error": assembler.error,
            }
            if exchange.usage is None:
                _charge_cut_short(channel, exchange, assembler, client_gone=client_gone)

    def _bad_gateway(self, channel: Channel, exchange: _Exchange, exc: httpx.HTTPError) -> None:
        exchange.status, exchange.outcome = 502, "upstream_error"
        exchange.error = f"upstream {channel.upstream_url}: {type(exc).__name__}: {exc}"
        # The client learns the kind of failure only; details stay in the host-side log.
        exchange.response = self.send_api_error(
            502, "api_error", f"model gateway: the model API could not be reached ({type(exc).__name__})"
        )
        exchange.tape.respond(502, [("content-type", "application/json")], json.dumps(exchange.response).encode())


def _parsed(raw: bytes) -> tuple[Any, Refusal | None]:
    """A model request's body, or why it is refused as it stands."""
    try:
        return strict_json(raw), None
    except DuplicateKeyError as exc:
        return None, Refusal(f"the request body names {exc.key!r} twice")
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser
        return None, Refusal("the request body is not JSON in UTF-8")


def _as_refused(raw: bytes, parsed: Any) -> Any:
    """A refused request as the log keeps it: whole when small, else its size and a preview
    (a sandbox repeating 32 MiB refusals must not fill the host's disk)."""
    return parsed if len(raw) <= REFUSED_BODY_LOG_BYTES else parse_body(raw, limit=REFUSED_BODY_LOG_BYTES)


def _charge_cut_short(channel: Channel, exchange: _Exchange, assembler: MessageAssembler, *, client_gone: bool) -> None:
    """Charge a stream that ended before its final usage (message_delta).

    The upstream bills what it generated, which the gateway never saw in full:
    the input side reported by message_start plus the output streamed so far
    (its characters at BYTES_PER_TOKEN a token — summarised thinking under-counts)
    is a floor. When the client went away, the upstream may have generated up
    to max_tokens before it noticed, and a client could otherwise hang up on
    every answer to use the model for nothing: such a stream is charged at
    least its whole reservation.
    """
    reported = assembler.usage
    streamed = math.ceil(assembler.streamed_chars / BYTES_PER_TOKEN)
    usage = reported.model_copy(update={"output_tokens": max(reported.output_tokens, streamed)})
    reserved = exchange.reservation.amount_usd if exchange.reservation else 0.0
    if client_gone:
        note = (f"the client went away before the final usage: charged its reservation (${reserved:.6f}) "
                "or what was reported and streamed, whichever is more")
    else:
        note = f"the stream ended before the final usage: charged what was reported plus ~{streamed} tokens streamed"
    channel.charge(exchange, usage, assembler.message.get("model"), at_least_usd=reserved if client_gone else 0.0,
                   note=note)


class Channel(UnixSocketService):
    """One case's way to the model: a unix socket, a budget and a request log.

    A request's log record is written once its response is over: read the log
    (and the final spend) after close(), which waits for requests in flight
    (up to `close_grace_s`), then drops idle connections and removes the socket.
    """

    handler = _GatewayHandler

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
        policy: GatewayPolicy = OPEN_POLICY,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        cassette_path: Path | None = None,
    ) -> None:
        super().__init__(socket_path, max_connections=max_connections)
        self.what = f"the model gateway of case {case_id}"
        self.cpu_share = CpuShare()
        self.ledger = Ledger(budget_usd)
        self.case_id = case_id
        self.log_path = log_path
        self.upstream_url = checked_upstream_url(upstream_url)
        self.credentials = credentials
        self.client = client
        self.policy = policy
        self.idle_timeout_s = idle_timeout_s
        # What the model really said, on the host's side: the collected stream is checked against it.
        self.conversation = ConversationRecord()
        self._lock = threading.Lock()
        self._usage = Usage()
        self._requests = 0
        self._refused = 0
        self._log: RequestLog | None = None
        self.cassette_path = cassette_path
        # Set while serving when the case records its model exchanges (`run --record`).
        self.recorder: CassetteRecorder | None = None

    @property
    def thread_name(self) -> str:
        return f"gateway-{self.case_id}"

    def _started(self, server: socketserver.BaseServer) -> None:
        self._log = RequestLog(self.log_path, secrets=self.credentials.secrets)
        if self.cassette_path is not None:
            self.recorder = CassetteRecorder(self.cassette_path, self.case_id, self.credentials.secrets)

    def _stopped(self, server: socketserver.BaseServer) -> None:
        super()._stopped(server)
        refused = self.connections_refused
        if refused > LOGGED_REFUSED_CONNECTIONS:
            self._write(self._connection_record(f"{refused} connections in all were closed unserved over the cap "
                                                f"of {self.max_connections}"))
        if self._log is not None:
            self._log.close()
        if self.recorder is not None:
            self.recorder.close()

    @property
    def spent_usd(self) -> float:
        return self.ledger.spent_usd

    def begin_step(self, cap_usd: float, upstream_url: str | None = None) -> None:
        """A pipeline's next step: a fresh record of the conversation (each step is its own CLI
        session, checked against what the model said to it alone), a cap on what it may spend
        within the case's budget, and, offline, the scripted model that answers it."""
        with self._lock:
            self.conversation = ConversationRecord()
            if upstream_url is not None:
                self.upstream_url = checked_upstream_url(upstream_url)
        self.ledger.cap_next(cap_usd)

    @property
    def usage(self) -> Usage:
        """The tokens of every model answer this channel forwarded (the truth of what the case used)."""
        with self._lock:
            return self._usage

    @property
    def requests(self) -> int:
        """Requests received, of every kind."""
        with self._lock:
            return self._requests

    @property
    def refused(self) -> int:
        """Requests refused because the budget left could not cover them."""
        with self._lock:
            return self._refused

    def admit(self, body: Mapping[str, Any], body_bytes: int) -> tuple[Admission, Reservation | None]:
        """Reserve a Messages request's worst case, priced by the model it names."""
        price = price_for(body.get("model")).price
        return self.ledger.admit(body, body_bytes, price, max_tokens_ceiling=self.policy.max_tokens_ceiling)

    def charge(self, exchange: _Exchange, usage: Usage, response_model: Any, *, at_least_usd: float = 0.0,
               note: str | None = None) -> None:
        """Bill one response, priced by the model that answered (else the one asked for)."""
        model = response_model if isinstance(response_model, str) and response_model else exchange.model
        lookup = price_for(model)
        exchange.usage, exchange.model = usage, model
        exchange.cost_usd = max(cost_usd(usage, lookup.price), at_least_usd)
        exchange.price_note, exchange.charge_note = lookup.note(model), note
        self.ledger.settle(exchange.reservation, exchange.cost_usd)
        with self._lock:
            self._usage += usage

    def release(self, exchange: _Exchange) -> None:
        """Give back a reservation that nothing was charged against."""
        if exchange.reservation is not None and not exchange.reservation.settled:
            self.ledger.settle(exchange.reservation, 0.0)

    # -- the hook broker's model calls, made with the host's credentials outside this socket

    def reserve_usd(self, amount_usd: float) -> Reservation | None:
        """Hold `amount_usd` of what is left for a call made on the case's behalf; None if it does not fit."""
        return self.ledger.reserve(amount_usd)

    def charge_call(self, reservation: Reservation, *, model: str, usage: Usage | None, at_least_usd: float = 0.0,
                    error: str | None = None) -> float:
        """Settle a `reserve_usd` reservation by the call's usage (priced by `model`) and log it; the cost."""
        lookup = price_for(model)
        cost = max(cost_usd(usage, lookup.price) if usage is not None else 0.0, at_least_usd)
        self.ledger.settle(reservation, cost)
        self._write(LogRecord(
            time=_now(), case_id=self.case_id, method="POST", path="(hook model) /v1/messages", status=None,
            outcome="hook_model", duration_ms=0, request_headers={}, model=model,
            usage=usage.model_dump() if usage is not None else None, cost_usd=cost, spent_usd=self.spent_usd,
            reserved_usd=reservation.amount_usd, price_note=lookup.note(model), error=error,
        ))
        return cost

    def _refuse_connection(self, request: socket.socket, open_connections: int, *, logged: bool) -> None:
        # No answer: the CLI retries a connection that closes at once.
        if logged:
            self._write(self._connection_record(
                f"connection closed unserved: the case holds {open_connections} connections "
                f"(cap {self.max_connections}); further refusals are counted, not logged one by one"))

    def _connection_record(self, error: str) -> LogRecord:
        return LogRecord(time=_now(), case_id=self.case_id, method="-", path="-", status=None,
                         outcome="too_many_connections", duration_ms=0, request_headers={},
                         spent_usd=self.spent_usd, error=error)

    def _write(self, record: LogRecord) -> None:
        if self._log is not None:
            self._log.write(record)

    def record_exchange(self, exchange: _Exchange) -> None:
        """Count and log a request whose response is over."""
        with self._lock:
            self._requests += 1
            self._refused += exchange.refused
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
            spent_usd=self.spent_usd,
            reserved_usd=exchange.reservation.amount_usd if exchange.reservation else None,
            max_tokens_lowered_from=exchange.max_tokens_lowered_from,
            betas_dropped=exchange.betas_dropped,
            refused=exchange.refused,
            price_note=exchange.price_note,
            charge_note=exchange.charge_note,
            error=exchange.error,
        )
        self._write(record)


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
        policy: GatewayPolicy = OPEN_POLICY,
    ) -> None:
        self.upstream_url = checked_upstream_url(upstream_url)
        self.credentials = credentials
        self.policy = policy
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
        cassette_path: Path | None = None,
    ) -> Channel:
        """Serve a case on `socket_path`; `upstream_url` overrides the gateway's for this
        case (offline runs give each case its own scripted server); with `cassette_path`,
        the channel records what it forwards there (gateway/cassette.py)."""
        channel = Channel(
            case_id,
            Path(socket_path),
            budget_usd,
            Path(log_path),
            upstream_url=upstream_url or self.upstream_url,
            credentials=self.credentials,
            client=self._client,
            policy=self.policy,
            cassette_path=cassette_path,
        ).start()
        with self._lock:
            # Closed ones go: each holds its case's conversation, and a run may have thousands of cases.
            self._channels = [c for c in self._channels if not c.closed]
            self._channels.append(channel)
        return channel

    def close(self) -> None:
        with self._lock:
            channels, self._channels = self._channels, []
        for channel in channels:
            channel.close()
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
