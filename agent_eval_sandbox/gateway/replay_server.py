"""The replay server: a Messages API endpoint that answers from a case's cassette.

`run --replay` puts one behind each case's gateway channel as its upstream,
as offline runs put a scripted server: the gateway checks, charges and logs
as always, and the CLI gets the recorded responses byte for byte (streams
included, so ids, text and usage are the recorded ones). A request that
matches nothing (gateway/replay.py) is answered with a 409 the CLI does not
retry (`x-should-retry: false`), and so is every request after it.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from agent_eval_sandbox.gateway.cassette import Cassette, Entry
from agent_eval_sandbox.gateway.http11 import BodyError, MessagesApiHandler
from agent_eval_sandbox.gateway.replay import Matcher, Mismatch
from agent_eval_sandbox.gateway.routes import Route, classify
from agent_eval_sandbox.socket_service import HttpService

log = logging.getLogger(__name__)

MISMATCH_STATUS = 409
NO_RETRY = (("x-should-retry", "false"),)
# Streams are written in pieces of this size: the client parses them as they come, as it would live.
STREAM_PIECE_BYTES = 16 * 1024


class _ReplayHandler(MessagesApiHandler):
    server: _ReplayHTTPServer

    def _dispatch(self) -> None:
        with self.server.service.request_in_flight():
            self._answer()

    do_HEAD = do_GET = do_POST = _dispatch

    def _answer(self) -> None:
        try:
            raw = self.read_body()
        except BodyError as exc:
            self.close_connection = True
            self.send_api_error(exc.status, "invalid_request_error", exc.message)
            return
        if classify(self.command, self.path) is Route.PROBE:
            self.send_json(200, {"status": "ok", "server": "agent-eval-sandbox replay server"})
            return
        answer = self.server.service.take(self.command, self.path, _body(raw))
        if isinstance(answer, Mismatch):
            self.send_api_error(MISMATCH_STATUS, "invalid_request_error",
                                f"agent-eval-sandbox {answer.summary}", NO_RETRY)
        else:
            self._replay(answer)

    def _replay(self, entry: Entry) -> None:
        response = entry.response
        if response is None:
            # Nothing was answered when it was recorded (the client had gone): nothing is now.
            self.close_connection = True
            return
        body = response.body_bytes()
        headers = [(name, value) for name, value in response.headers if name != "content-length"]
        if response.is_stream:
            self.start_chunked(response.status, headers)
            for start in range(0, len(body), STREAM_PIECE_BYTES):
                self.write_chunk(body[start:start + STREAM_PIECE_BYTES])
            self.end_chunked()
            return
        self.send_response(response.status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _body(raw: bytes) -> Any:
    """The request body as the cassette holds requests: parsed JSON (the gateway forwards JSON only)."""
    try:
        return json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        return {"unparsed": raw.decode("utf-8", "replace")}


class _ReplayHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, service: ReplayServer) -> None:
        self.service = service
        super().__init__((service.host, service.port), _ReplayHandler)

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("replay server: connection error", exc_info=True)


class ReplayServer(HttpService):
    """A case's cassette served on 127.0.0.1; `verdict()` says how the replay went once the case is over."""

    what = "the replay server"
    bind_fix = "free a local port"
    close_grace_s = 0.0

    def __init__(self, cassette: Cassette, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self._matcher = Matcher(cassette)
        self._lock = threading.Lock()

    @property
    def thread_name(self) -> str:
        return "replay-server"

    def _http_server(self) -> _ReplayHTTPServer:
        return _ReplayHTTPServer(self)

    def take(self, method: str, path: str, body: Any) -> Entry | Mismatch:
        with self._lock:
            return self._matcher.take(method, path, body)

    def verdict(self) -> Mismatch | None:
        with self._lock:
            return self._matcher.verdict()
