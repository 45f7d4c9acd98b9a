"""The HTTP/1.1 plumbing both servers share: bodies, JSON replies, chunked streams.

Streams use chunked transfer encoding so the client sees an explicit end;
a stream ended only by closing the connection has been seen cut short by
the CLI.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from agent_eval_sandbox.gateway.api_errors import error_body

log = logging.getLogger(__name__)

# The Messages API's own request size limit.
MAX_BODY_BYTES = 32 * 1024 * 1024

Headers = Iterable[tuple[str, str]]


class BodyError(Exception):
    """The request body cannot be read; the connection must close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class MessagesApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Idle keep-alive connections give their thread back after this long.
    timeout = 900

    # The status line already sent for the current request, if any: once it
    # is out, a failure can no longer be reported as an HTTP error.
    response_status: int | None = None
    raw_requestline: bytes  # set by BaseHTTPRequestHandler for each request

    def send_response(self, code: int, message: str | None = None) -> None:
        self.response_status = code
        super().send_response(code, message)

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise BodyError(411, "chunked request bodies are not supported; send Content-Length")
        raw_length = self.headers.get("Content-Length", "0") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            raise BodyError(400, f"invalid Content-Length {raw_length!r}") from None
        if length < 0:
            raise BodyError(400, f"invalid Content-Length {raw_length!r}")
        if length > MAX_BODY_BYTES:
            raise BodyError(413, f"request body of {length} bytes exceeds {MAX_BODY_BYTES}")
        return self.rfile.read(length)

    def send_json(self, status: int, body: Mapping[str, Any], headers: Headers = ()) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def send_api_error(self, status: int, error_type: str, message: str, headers: Headers = ()) -> dict[str, Any]:
        body = error_body(error_type, message)
        self.send_json(status, body, headers)
        return body

    def start_chunked(self, status: int, headers: Headers) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.flush()

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def address_string(self) -> str:
        # A unix-socket peer has no (host, port) address.
        return self.client_address[0] if isinstance(self.client_address, tuple) and self.client_address else "unix"

    def log_message(self, format: str, *args: Any) -> None:
        # Every request is recorded by the server that owns it; stderr noise is not wanted.
        log.debug("%s " + format, self.address_string(), *args)
