"""Unix sockets the host serves to sandboxes (the model gateway, the hook broker)."""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import stat
import threading
from pathlib import Path
from typing import Any

from agent_eval_sandbox.errors import UserError

# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107


def prepare_socket_path(path: Path, what: str) -> None:
    """Make `path` bindable: short enough, its directory present, a stale socket removed."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise UserError(
            f"{what} socket path is {size} bytes, over the {MAX_SOCKET_PATH_BYTES}-byte limit of unix sockets: {path}",
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


class CappedUnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A threaded unix-socket server that holds at most `max_connections` connections at once.

    `ThreadingMixIn` starts a thread for every accepted connection, and each
    holds a descriptor until its handler ends: a sandbox opening connections
    without end would take the whole controller's descriptors (measured: 1,500
    idle connections to one gateway socket ended the run). Here a connection
    past the cap is refused in the accepting thread itself — `refuse()`, which
    must not block, then close — before any thread exists for it.
    """

    daemon_threads = True

    def __init__(self, path: str, handler: type[socketserver.BaseRequestHandler], *, max_connections: int) -> None:
        self.max_connections = max_connections
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(path, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            admitted = len(self._open) < self.max_connections
            if admitted:
                self._open.add(request)
        if not admitted:
            try:
                self.refuse(request)
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

    def refuse(self, request: socket.socket) -> None:
        """A connection over the cap, in the accepting thread: answer without blocking, or not at all."""

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
