"""Unix sockets the host serves to sandboxes (the model gateway, the hook broker).

A `UnixSocketService` binds a path any user may connect to (the container's
user is not ours), holds at most `max_connections` connections at once, and
removes its socket file when it closes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import socketserver
import stat
import threading
from pathlib import Path
from typing import Any, Generic, TypeVar

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.socket_service import SocketService

log = logging.getLogger(__name__)

# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
# Connections refused over the cap are counted; only the first few get a line of their own in a log.
LOGGED_REFUSED_CONNECTIONS = 10


def prepare_socket_path(path: Path, what: str) -> None:
    """Make `path` bindable: short enough, its directory present, a stale socket removed."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise UserError(
            f"{what}: the socket path is {size} bytes, over the {MAX_SOCKET_PATH_BYTES}-byte limit of unix sockets:"
            f" {path}",
            fix="use a shorter directory for the per-case sockets",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise UserError(f"{path} exists and is not a socket", fix="remove it or choose another socket path")
    path.unlink()  # left by an earlier run that did not close


ServiceT = TypeVar("ServiceT", bound="UnixSocketService")


class CappedUnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer, Generic[ServiceT]):
    """A threaded unix-socket server that holds at most `max_connections` connections at once.

    `ThreadingMixIn` starts a thread for every accepted connection, and each
    holds a descriptor until its handler ends: a sandbox opening connections
    without end would take the whole controller's descriptors (measured: 1,500
    idle connections to one gateway socket ended the run). Here a connection
    past the cap is refused in the accepting thread itself — the service's
    `refuse_over_cap`, which must not block, then close — before any thread
    exists for it. Handlers reach their service as `self.server.service`.
    """

    daemon_threads = True
    # A CLI with parallel subagents or tool calls opens several connections at once.
    request_queue_size = 64

    def __init__(self, service: ServiceT, handler: type[socketserver.BaseRequestHandler]) -> None:
        self.service = service
        self.max_connections = service.max_connections
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(str(service.socket_path), handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            admitted = len(self._open) < self.max_connections
            if admitted:
                self._open.add(request)
        if not admitted:
            try:
                self.service.refuse_over_cap(request, self.open_connections)
            finally:
                self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)

    def handle_error(self, request: object, client_address: object) -> None:
        # Errors inside a request are the handler's to log; what arrives here is a
        # connection dropped between requests.
        log.debug("%s: connection error", self.service.what, exc_info=True)

    @property
    def open_connections(self) -> int:
        with self._open_lock:
            return len(self._open)

    def close_connections(self) -> None:
        """Shut down every connection still open: handlers waiting on them see EOF and end."""
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class UnixSocketService(SocketService):
    """A `SocketService` on a unix socket (mode 0666) with a connection cap.

    On close, after the requests in flight, the connections still open (idle
    ones) are shut down and the socket file is removed.
    """

    bind_fix = "check that the socket's directory is writable"
    handler: type[socketserver.BaseRequestHandler]

    def __init__(self, socket_path: Path, *, max_connections: int) -> None:
        super().__init__()
        self.socket_path = socket_path
        self.max_connections = max_connections
        self._connections_refused = 0
        self._cap_lock = threading.Lock()

    @property
    def address(self) -> str:
        return str(self.socket_path)

    @property
    def serving(self) -> bool:
        # The socket file is what a sandbox connects to: without it, nothing reaches the server.
        return super().serving and self.socket_path.is_socket()

    def _bind(self) -> CappedUnixServer[Any]:
        prepare_socket_path(self.socket_path, self.what)
        server: CappedUnixServer[Any] = CappedUnixServer(self, self.handler)
        try:
            # The container's user is not ours.
            os.chmod(self.socket_path, 0o666)
        except OSError:
            server.server_close()
            self.socket_path.unlink(missing_ok=True)
            raise
        return server

    def _stopped(self, server: socketserver.BaseServer) -> None:
        if isinstance(server, CappedUnixServer):
            server.close_connections()
        self.socket_path.unlink(missing_ok=True)

    @property
    def connections_refused(self) -> int:
        """Connections closed unserved because the service held `max_connections` already."""
        with self._cap_lock:
            return self._connections_refused

    def refuse_over_cap(self, request: socket.socket, open_connections: int) -> None:
        """Count a connection the server refuses over the cap (in its accepting thread) and answer it."""
        with self._cap_lock:
            self._connections_refused += 1
            count = self._connections_refused
        self._refuse_connection(request, open_connections, logged=count <= LOGGED_REFUSED_CONNECTIONS)

    def _refuse_connection(self, request: socket.socket, open_connections: int, *, logged: bool) -> None:
        """A connection over the cap, in the accepting thread: answer without blocking, or not at all.
        `logged`: one of the first LOGGED_REFUSED_CONNECTIONS, to get a log line of its own."""
