"""The scripted model server: a Messages API endpoint that answers from a script.

Offline runs put it behind the gateway as the upstream; tests and LLM judges
talk to it directly. It serves the real CLI (streaming) and the `anthropic`
SDK (streaming and not).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from agent_eval_sandbox.gateway.http11 import BodyError, MessagesApiHandler
from agent_eval_sandbox.gateway.replies import (
    estimate_tokens,
    exhausted_step,
    new_id,
    reply_message,
)
from agent_eval_sandbox.gateway.routes import Route, classify
from agent_eval_sandbox.gateway.script import (
    Script,
    load_script,
    select_step_index,
    tool_choice_conflict,
)
from agent_eval_sandbox.gateway.sse import encode_event, message_events
from agent_eval_sandbox.socket_service import HttpService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedRequest:
    """One request as the server saw it (for tests and debugging)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    step_index: int | None
    status: int


class _ScriptHandler(MessagesApiHandler):
    server: _ScriptHTTPServer
    # An answer goes out as several small writes (headers, then each chunk): on a kept-alive
    # connection Nagle's algorithm would hold each back until the client's delayed ACK, ~40 ms.
    disable_nagle_algorithm = True

    def _dispatch(self) -> None:
        with self.server.service.request_in_flight():
            self._answer()

    do_HEAD = do_GET = do_POST = _dispatch

    def _answer(self) -> None:
        try:
            raw = self.read_body()
        except BodyError as exc:
            self.close_connection = True
            self._record(None, None, exc.status)
            self.send_api_error(exc.status, "invalid_request_error", exc.message)
            return
        route = classify(self.command, self.path)
        if route is Route.PROBE:
            self._record(None, None, 200)
            self.send_json(200, {"status": "ok", "server": "agent-eval-sandbox scripted model server"})
        elif route is Route.OTHER:
            self._not_found(None)
        else:
            self._answer_post(route, raw)

    def _answer_post(self, route: Route, raw: bytes) -> None:
        try:
            request = json.loads(raw or b"null")
        except json.JSONDecodeError as exc:
            self._record(raw.decode("utf-8", "replace"), None, 400)
            self.send_api_error(400, "invalid_request_error", f"request body is not JSON: {exc}")
            return
        if not isinstance(request, dict):
            self._record(request, None, 400)
            self.send_api_error(400, "invalid_request_error", "request body must be a JSON object")
        elif route is Route.MESSAGES:
            self._answer_messages(request)
        else:
            self._record(request, None, 200)
            self.send_json(200, {"input_tokens": estimate_tokens(request)})

    def _not_found(self, body: Any) -> None:
        self._record(body, None, 404)
        self.send_api_error(404, "not_found_error", f"the scripted model server has no {self.command} {self.path}")

    def _answer_messages(self, request: dict[str, Any]) -> None:
        script = self.server.service.script
        index = self.server.service.next_step_index(request)
        step = script.step_at(index)
        where = f"script {script.source}, step {index}"
        if step is None:
            step = exhausted_step(index, len(script.steps))
            where = f"script {script.source} (exhausted: {len(script.steps)} steps), request for step {index}"
        conflict = tool_choice_conflict(step, request.get("tool_choice"))
        if conflict:
            self._record(request, index, 400)
            self.send_api_error(400, "invalid_request_error", f"{where}: {conflict}")
            return
        if step.delay_s:
            time.sleep(step.delay_s)
        if step.error is not None:
            self._record(request, index, step.error.http_status)
            self.send_api_error(step.error.http_status, step.error.error_type, step.error.message)
            return
        message = reply_message(step, request)
        headers = [("request-id", new_id("req_"))]
        self._record(request, index, 200)
        if request.get("stream"):
            self.start_chunked(200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), *headers])
            for name, data in message_events(message):
                self.write_chunk(encode_event(name, data))
            self.end_chunked()
        else:
            self.send_json(200, message, headers)

    def _record(self, body: Any, step_index: int | None, status: int) -> None:
        # Before the answer goes out: whoever saw an answer finds its request recorded, even once
        # the server closed (it does not wait for its handlers, see close_grace_s).
        self.server.service.record(
            ServedRequest(self.command, self.path, dict(self.headers.items()), body, step_index, status)
        )


class _ScriptHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, service: ScriptedModelServer) -> None:
        self.service = service
        super().__init__((service.host, service.port), _ScriptHandler)

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hangs up mid-response is routine, not a traceback on stderr.
        log.debug("scripted model server: connection error", exc_info=True)


class ScriptedModelServer(HttpService):
    """A scripted Messages API server on a background thread.

    with ScriptedModelServer("script.yaml") as server:
        env["ANTHROPIC_BASE_URL"] = server.url
    """

    what = "the model server"
    bind_fix = "choose another --port (0 picks a free one) or --host"
    # It stands in for a remote API, which does not wait for its clients either: an
    # answer still delayed or streaming when it closes ends on its own thread. (A
    # gateway channel in front of it waits for its own requests before it closes.)
    close_grace_s = 0.0

    def __init__(self, script: Script | str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.script = script if isinstance(script, Script) else load_script(os.fspath(script))
        self._requests: list[ServedRequest] = []
        self._steps_lock = threading.Lock()
        self._served = 0

    @property
    def thread_name(self) -> str:
        return "scripted-model-server"

    def _http_server(self) -> _ScriptHTTPServer:
        return _ScriptHTTPServer(self)

    @property
    def requests(self) -> list[ServedRequest]:
        """Every request served so far (kept after close, for assertions)."""
        with self._steps_lock:
            return list(self._requests)

    def record(self, request: ServedRequest) -> None:
        with self._steps_lock:
            self._requests.append(request)

    def next_step_index(self, request: dict[str, Any]) -> int:
        with self._steps_lock:
            index = select_step_index(self.script.advance, request, self._served)
            self._served += 1
            return index


def serve(script_path: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve a script in the foreground until interrupted (`agent-eval-sandbox model-server`).

    Raises ConfigError for a bad script, before anything listens, and
    UserError when the address cannot be bound.
    """
    with ScriptedModelServer(script_path, host, port) as server:
        print(
            f"scripted model server: {len(server.script.steps)} step(s) from {server.script.source} "
            f"({server.script.advance.value}) at {server.url}\n"
            f"  point clients at it: ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY=placeholder",
            file=sys.stderr,
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
