"""A server the host runs on a thread of its own, with one lifecycle.

    with SomeService(...) as service:   # start(): bind, then serve on a thread
        ...
    # close(): stop accepting, wait (up to a grace) for the requests in flight, release the rest

The model gateway's channels and the hook broker (unix sockets, `unix_socket.py`)
and the scripted model server (TCP) are such services. A failed bind is a
`UserError` naming the address and a fix, the same for all of them.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import socketserver
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Self

from agent_eval_sandbox.cpu_share import CpuShare
from agent_eval_sandbox.errors import UserError

JOIN_TIMEOUT_S = 5.0
# How often a request held back by its case's CPU share looks again (and whether the service closed).
_SHARE_POLL_S = 0.25


def _serve_until_woken(server: socketserver.TCPServer, wake: socket.socket) -> None:
    """`serve_forever`, but stopped the moment `wake` becomes readable, not at the next poll.

    A case opens and closes several services (its gateway channel, its hook
    broker, offline its scripted model server); a polling loop would make
    each close wait for its next tick.
    """
    server.timeout = 0  # handle_request() below: the connection is there, or it went away meanwhile
    with selectors.DefaultSelector() as selector:
        selector.register(server.fileno(), selectors.EVENT_READ, "request")
        selector.register(wake, selectors.EVENT_READ, "wake")
        while True:
            ready = selector.select()
            if any(key.data == "wake" for key, _ in ready):
                return
            server.handle_request()
            server.service_actions()


class SocketService(ABC):
    """A `socketserver` server served on a daemon thread.

    `start()` binds and starts serving and returns the service; on a started
    service it does nothing, on a closed one it raises (a service is not
    reused). `close()` is idempotent: it stops accepting, waits up to
    `grace_s` for the requests in flight (the handlers' `request_in_flight()`
    blocks) and then releases what the service holds (`_stopped`).
    """

    # What the service is, for messages ("the gateway socket of case c1").
    what: str = "the server"
    # How to fix a bind that failed.
    bind_fix: str = "check the address"
    # close()'s default wait for requests in flight.
    close_grace_s: float = 5.0

    def __init__(self) -> None:
        # What a case's requests may take of the controller's CPU (`cpu_share.py`); None: no limit.
        self.cpu_share: CpuShare | None = None
        self._charging = threading.Lock()
        self._activity = threading.Condition()
        self._in_flight = 0
        self._closed = False
        self._server: socketserver.TCPServer | None = None
        self._thread: threading.Thread | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None

    # ---- what a kind of service provides

    @property
    @abstractmethod
    def address(self) -> str:
        """Where the service listens (or will), for messages."""

    @property
    @abstractmethod
    def thread_name(self) -> str: ...

    @abstractmethod
    def _bind(self) -> socketserver.TCPServer:
        """A bound, listening server; OSError when the address cannot be had."""

    def _started(self, server: socketserver.BaseServer) -> None:
        """After the bind, before serving: open what the handlers write to (by default nothing)."""
        return None

    def _stopped(self, server: socketserver.BaseServer) -> None:
        """After the requests in flight ended (or the grace did): release the rest (by default nothing)."""
        return None

    # ---- the lifecycle

    def start(self) -> Self:
        with self._activity:
            if self._closed:
                raise RuntimeError(f"{self.what} is closed; a closed service is not started again")
            if self._server is not None:
                return self
        try:
            server = self._bind()
        except OSError as exc:
            raise UserError(f"{self.what} cannot listen on {self.address}: {exc.strerror or exc}",
                            fix=self.bind_fix) from exc
        try:
            self._started(server)
        except BaseException:
            server.server_close()
            self._stopped(server)
            raise
        self._server = server
        self._wake = socket.socketpair()
        self._thread = threading.Thread(target=_serve_until_woken, args=(server, self._wake[0]),
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    @property
    def started(self) -> bool:
        with self._activity:
            return self._server is not None

    @property
    def serving(self) -> bool:
        """Started, not closed, and its serving thread alive: a connection made now is answered."""
        with self._activity:
            server, thread = self._server, self._thread
        return server is not None and thread is not None and thread.is_alive()

    @property
    def closed(self) -> bool:
        """True from the moment close() begins."""
        with self._activity:
            return self._closed

    def close(self, grace_s: float | None = None) -> None:
        """Stop accepting, let requests in flight finish (up to `grace_s`), release the rest."""
        with self._activity:
            server, self._server = self._server, None
            self._closed = True
        if server is None:
            return
        wake, self._wake = self._wake, None
        if wake is not None:
            wake[1].send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=JOIN_TIMEOUT_S)
            self._thread = None
        server.server_close()
        if wake is not None:
            for end in wake:
                end.close()
        with self._activity:
            self._activity.wait_for(lambda: self._in_flight == 0,
                                    timeout=self.close_grace_s if grace_s is None else grace_s)
        self._stopped(server)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests in flight

    @contextlib.contextmanager
    def request_in_flight(self) -> Iterator[None]:
        """Count a request as in flight while the block runs: close() waits for it."""
        with self._activity:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._activity:
                self._in_flight -= 1
                self._activity.notify_all()

    @contextlib.contextmanager
    def charged(self) -> Iterator[None]:
        """Read and parse what a case sent inside this block: one of its requests at a time, once its
        CPU share allows it (`cpu_share.py`), the CPU this thread spends in it charged to the share.

        One at a time, or requests arriving together would all find the share in credit and
        overdraw it together. Only reading and parsing go here: never waiting on the model or on
        the eval's own handlers, which would hold the case's other requests behind it."""
        share = self.cpu_share
        if share is None:
            yield
            return
        with self._charging:
            waited = 0.0
            while (wait := share.wait_s()) > 0 and not self.closed:
                pause = min(wait, _SHARE_POLL_S)
                time.sleep(pause)
                waited += pause
            if waited:
                share.waited(waited)
            started = time.thread_time()
            try:
                yield
            finally:
                share.charge(time.thread_time() - started)

    @property
    def in_flight(self) -> int:
        """Requests being handled right now (including the caller's)."""
        with self._activity:
            return self._in_flight


class HttpService(SocketService):
    """A SocketService speaking HTTP on `host:port` (port 0: a free one, known once started)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__()
        self.host, self.port = host, port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        if not self.started:
            raise RuntimeError(f"{self.what} is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def _bind(self) -> socketserver.TCPServer:
        server = self._http_server()
        self.port = server.server_address[1]
        return server

    @abstractmethod
    def _http_server(self) -> socketserver.TCPServer:
        """The bound server (on `self.host`, `self.port`)."""
