"""The controller's TCP front door for sandboxes that cannot be handed a unix socket (Kubernetes Pods).

On Docker a case reaches its gateway channel and hook broker through the
unix sockets of its channel directory, bind-mounted into its container: the
socket a request arrives on is the case. A Pod on another node cannot be
handed a socket, so the controller listens on one TCP port, and each case
gets a random token (256 bits) that stands for its channel directory:

    pod -> relay:  b"agent-eval-relay/1 <token> <gateway.sock|broker.sock>\\n"
    relay -> pod:  b"ok\\n"   then the bytes of that case's socket, both ways
                   b"refused <why>\\n"   and the connection is closed

After "ok" the relay only pipes bytes to the very unix socket a Docker
sandbox of the same case would use, so the gateway and the broker, their
budgets, logs and records, are the same code with the same per-case state;
the token itself never reaches them, nor the model API. A token is
registered when its case's sandbox is created and revoked when it is
destroyed: it is worthless for any other case and after its case. An unknown
token is refused and logged (the controller's log). Lookups go by the token's
digest and end in a constant-time comparison.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import secrets
import socket
import socketserver
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.socket_service import SocketService

log = logging.getLogger(__name__)

PROTOCOL = b"agent-eval-relay/1"
MAX_PREAMBLE_BYTES = 256
PREAMBLE_TIMEOUT_S = 10.0
TOKEN_BYTES = 32
SOCKET_NAMES = (paths.GATEWAY_SOCKET_NAME, paths.BROKER_SOCKET_NAME)
MAX_CONNECTIONS = 512  # all cases together (each case's own sockets cap it further)
# Connections from one address (one Pod) that have not yet said whose they are. Before its token is read a
# connection belongs to no case, so no case's cap bounds it: without this, one case's connections that never
# finish their preamble took the whole relay from its neighbours.
MAX_PENDING_PER_PEER = 16
MAX_LOGGED_REFUSALS = 200
_CHUNK = 65536


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


@dataclass(frozen=True)
class _Entry:
    token: str
    channel_dir: Path
    case: str  # for the log


class RelayError(Exception):
    """A connection the relay refuses before piping anything."""


def parse_preamble(line: bytes) -> tuple[str, str]:
    """(token, socket name) of a preamble line (without its newline); RelayError when malformed."""
    parts = line.split(b" ")
    if len(parts) != 3 or parts[0] != PROTOCOL:
        raise RelayError("not an agent-eval relay preamble")
    try:
        token, name = parts[1].decode("ascii"), parts[2].decode("ascii")
    except UnicodeDecodeError:
        raise RelayError("the preamble is not ASCII") from None
    if name not in SOCKET_NAMES:
        raise RelayError(f"unknown socket {name[:40]!r}")
    return token, name


def read_preamble(sock: socket.socket, deadline: float) -> bytes:
    """One line, read a byte at a time: nothing past the newline is taken from the socket."""
    line = bytearray()
    while len(line) <= MAX_PREAMBLE_BYTES:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            byte = sock.recv(1)
        except TimeoutError:
            raise RelayError(f"no preamble within {PREAMBLE_TIMEOUT_S:g} s") from None
        if not byte:
            raise RelayError("closed before the preamble ended")
        if byte == b"\n":
            return bytes(line)
        line += byte
    raise RelayError(f"the preamble is longer than {MAX_PREAMBLE_BYTES} bytes")


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(_CHUNK)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


class _Handler(socketserver.BaseRequestHandler):
    server: _RelayServer

    def handle(self) -> None:
        relay = self.server.relay
        sock: socket.socket = self.request
        peer = f"{self.client_address[0]}:{self.client_address[1]}"
        with relay.request_in_flight():
            try:
                try:
                    line = read_preamble(sock, time.monotonic() + PREAMBLE_TIMEOUT_S)
                finally:
                    self.server.said_who(self.client_address, sock)
                token, name = parse_preamble(line)
                entry = relay.lookup(token)
                if entry is None:
                    raise RelayError("unknown or expired token")
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    upstream.connect(str(entry.channel_dir / name))
                except OSError as exc:
                    upstream.close()
                    raise RelayError(f"case {entry.case}: {name} is not being served ({exc.strerror})") from None
            except RelayError as exc:
                relay.refuse(peer, str(exc))
                with contextlib.suppress(OSError):
                    sock.settimeout(2.0)
                    sock.sendall(b"refused " + str(exc).encode("utf-8", "replace")[:200] + b"\n")
                return
            except OSError:
                return  # the client went away during the preamble
            with upstream:
                sock.settimeout(None)
                sock.sendall(b"ok\n")
                back = threading.Thread(target=_pump, args=(upstream, sock), daemon=True)
                back.start()
                _pump(sock, upstream)
                back.join()


class _RelayServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, relay: Relay, address: tuple[str, int]) -> None:
        self.relay = relay
        self._open = 0
        self._pending: dict[str, set[Any]] = {}  # address -> its connections still in their preamble
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        peer = str(client_address[0])
        with self._open_lock:
            if self._open >= MAX_CONNECTIONS:
                refusal: str | None = f"over the relay's cap of {MAX_CONNECTIONS} connections"
            elif len(self._pending.get(peer, ())) >= MAX_PENDING_PER_PEER:
                refusal = f"over the cap of {MAX_PENDING_PER_PEER} connections from one address still in their preamble"
            else:
                refusal = None
                self._open += 1
                self._pending.setdefault(peer, set()).add(request)
        if refusal is not None:
            self.relay.refuse(f"{peer}:{client_address[1]}", refusal)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def said_who(self, client_address: Any, request: Any) -> None:
        """The connection's preamble is over (read or failed): it no longer counts as pending."""
        peer = str(client_address[0])
        with self._open_lock:
            pending = self._pending.get(peer)
            if pending is not None:
                pending.discard(request)
                if not pending:
                    del self._pending[peer]

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.said_who(client_address, request)
            with self._open_lock:
                self._open -= 1

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("relay: connection error", exc_info=True)


class Relay(SocketService):
    """The TCP front door; `register` a case's channel directory to get its token, `revoke` it at the end."""

    bind_fix = "choose another sandbox.controller.port, or stop what listens there"

    def __init__(self, host: str = "0.0.0.0", port: int = 0) -> None:
        super().__init__()
        self.what = "the sandbox relay"
        self._requested = (host, port)
        self._bound: tuple[str, int] | None = None
        self._entries: dict[bytes, _Entry] = {}
        self._lock = threading.Lock()
        self._refusals = 0
        self.refusal_log: list[str] = []  # the first MAX_LOGGED_REFUSALS, for tests and post-mortems

    @property
    def address(self) -> str:
        host, port = self._bound or self._requested
        return f"{host}:{port}"

    @property
    def port(self) -> int:
        assert self._bound is not None, "the relay is not started"
        return self._bound[1]

    @property
    def thread_name(self) -> str:
        return "sandbox-relay"

    def _bind(self) -> socketserver.TCPServer:
        server = _RelayServer(self, self._requested)
        host, port = server.server_address[:2]
        self._bound = (str(host), int(port))
        return server

    # ---- tokens

    def register(self, channel_dir: Path, case: str) -> str:
        token = new_token()
        with self._lock:
            self._entries[_digest(token)] = _Entry(token, channel_dir, case)
        return token

    def revoke(self, token: str) -> None:
        with self._lock:
            self._entries.pop(_digest(token), None)

    def lookup(self, token: str) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(_digest(token))
        if entry is None or not hmac.compare_digest(entry.token.encode(), token.encode("utf-8", "surrogateescape")):
            return None
        return entry

    @property
    def registered(self) -> int:
        with self._lock:
            return len(self._entries)

    # ---- refusals

    @property
    def refusals(self) -> int:
        with self._lock:
            return self._refusals

    def refuse(self, peer: str, why: str) -> None:
        with self._lock:
            self._refusals += 1
            logged = self._refusals <= MAX_LOGGED_REFUSALS
            if logged:
                self.refusal_log.append(f"{peer}: {why}")
        if logged:
            log.warning("sandbox relay: refused a connection from %s: %s", peer, why)
