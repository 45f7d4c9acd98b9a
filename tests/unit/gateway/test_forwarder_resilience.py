"""The in-sandbox forwarder (inside/forwarder.py) keeps serving the whole session.

Fixed: one connection whose setup failed (a client reset before it was
accepted, no thread to spare) ended the accept loop, and a gateway socket
that refused a connection for a moment had the client closed at once. Either
reached the CLI as ECONNRESET before any request reached the gateway, and the
CLI gives up after two retries: the case was recorded as the agent exiting 1.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import forwarder


class Upstream:
    """A unix server answering each connection with what it read, upper-cased, once the client half-closes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock: socket.socket | None = None

    def listen(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(self.path))
        sock.listen(8)
        self.sock = sock
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        assert self.sock is not None
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(4096):
                    data += chunk
                conn.sendall(data.upper())

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    server = Upstream(tmp_path / "gw.sock")
    yield server
    server.close()


def _start(tmp_path: Path, unix_path: Path) -> tuple[str, int]:
    ready = tmp_path / "ready"
    threading.Thread(target=forwarder.forward, args=(("127.0.0.1", 0), str(unix_path), str(ready)),
                     kwargs={"announce": False}, daemon=True).start()
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert time.monotonic() < deadline, "the forwarder never listened"
        time.sleep(0.01)
    host, port = ready.read_text().strip().rsplit(":", 1)
    return host, int(port)


def _exchange(address: tuple[str, int], payload: bytes) -> bytes:
    with socket.create_connection(address, timeout=20) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := conn.recv(4096):
            received += chunk
        return received


def test_a_gateway_socket_that_is_not_there_yet_is_waited_for(tmp_path: Path, upstream: Upstream) -> None:
    address = _start(tmp_path, upstream.path)
    threading.Timer(0.5, upstream.listen).start()  # the first connect finds no socket (ENOENT)
    assert _exchange(address, b"post /v1/messages") == b"POST /V1/MESSAGES"


def test_a_gateway_that_never_comes_is_given_up_on(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(FileNotFoundError):
        forwarder.connect_unix(str(tmp_path / "missing.sock"), 0.3)
    assert time.monotonic() - started < 5


def test_a_connection_whose_setup_fails_does_not_end_the_forwarder(tmp_path: Path, upstream: Upstream,
                                                                   monkeypatch) -> None:
    upstream.listen()
    real = socket.socket.setsockopt
    failed: list[bool] = []

    def reset_once(self: socket.socket, *args: object) -> None:
        if not failed and args[:2] == (socket.IPPROTO_TCP, socket.TCP_NODELAY):
            failed.append(True)
            raise ConnectionResetError(104, "Connection reset by peer")
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "setsockopt", reset_once)
    address = _start(tmp_path, upstream.path)
    with socket.create_connection(address, timeout=5) as first:  # dropped by the forwarder, alone
        first.settimeout(5)
        assert first.recv(10) == b""
    assert failed
    assert _exchange(address, b"next request") == b"NEXT REQUEST"


def test_no_thread_to_spare_for_one_connection_does_not_end_the_forwarder(tmp_path: Path, upstream: Upstream,
                                                                          monkeypatch) -> None:
    upstream.listen()
    real = threading.Thread.start
    refused: list[bool] = []

    def no_thread_once(self: threading.Thread) -> None:
        if not refused and self._target is forwarder._bridge:  # type: ignore[attr-defined]
            refused.append(True)
            raise RuntimeError("can't start new thread")
        real(self)

    address = _start(tmp_path, upstream.path)
    monkeypatch.setattr(threading.Thread, "start", no_thread_once)
    with socket.create_connection(address, timeout=5) as first:
        first.settimeout(5)
        assert first.recv(10) == b""
    assert refused
    assert _exchange(address, b"still here") == b"STILL HERE"
