"""In a Pod the launcher and the forwarder reach the gateway through the controller's relay (TCP), and
try again, within their patience, when a try fails for a moment.

Fixed: a try that timed out (the relay slow to answer, a SYN dropped while the Pod's network came up) raised
a TimeoutError, which carries no errno, so it was never tried again although ETIMEDOUT was meant to be; and
one try could hang for 10 s of the 15 s patience. The launcher then ended the case `infra_error` before the
agent started (exit code 4 of a whole run, once, in CI's podman quickstart).
"""

from __future__ import annotations

import errno
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import forwarder

# The forwarder's own: it imports controller_link as the top-level module it is inside the sandbox.
controller_link = forwarder.controller_link


class FakeRelay:
    """A TCP server that speaks the relay's preamble; `answers` says, per connection in turn, what to do:
    "ok" (answer ok, then echo upper-cased), "silent" (read the preamble, never answer) or "refuse"."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            answer = self.answers[min(self.connections, len(self.answers) - 1)]
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn, answer), daemon=True).start()

    def _answer(self, conn: socket.socket, answer: str) -> None:
        line = b""
        while not line.endswith(b"\n"):
            byte = conn.recv(1)
            if not byte:
                conn.close()
                return
            line += byte
        if answer == "silent":
            self.held.append(conn)
            return
        with conn:
            if answer == "refuse":
                conn.sendall(b"refused unknown or expired token\n")
                return
            conn.sendall(b"ok\n")
            data = b""
            while chunk := conn.recv(4096):
                data += chunk
            conn.sendall(data.upper())

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def relay_answers() -> Iterator[list[FakeRelay]]:
    made: list[FakeRelay] = []
    yield made
    for relay in made:
        relay.close()


def _pod_socket(tmp_path: Path, relay: FakeRelay) -> str:
    """The gateway socket's path as a Pod sees it: not there, a relay.json beside it."""
    (tmp_path / controller_link.RELAY_FILE_NAME).write_text(
        json.dumps({"host": "127.0.0.1", "port": relay.port, "token": "t" * 43}), encoding="utf-8")
    return str(tmp_path / "gateway.sock")


def _round_trip(sock: socket.socket, payload: bytes) -> bytes:
    with sock:
        sock.settimeout(5)
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
        return received


def test_a_relay_try_that_times_out_is_tried_again(tmp_path: Path, relay_answers: list[FakeRelay],
                                                    monkeypatch) -> None:
    relay = FakeRelay(["silent", "ok"])
    relay_answers.append(relay)
    monkeypatch.setattr(forwarder, "RELAY_TRY_S", 0.3)
    sock = forwarder.connect_unix(_pod_socket(tmp_path, relay), 5.0)
    assert relay.connections == 2
    assert _round_trip(sock, b"post /v1/messages") == b"POST /V1/MESSAGES"


def test_a_relay_that_never_answers_is_given_up_on_within_the_patience(tmp_path: Path,
                                                                        relay_answers: list[FakeRelay]) -> None:
    relay = FakeRelay(["silent"])
    relay_answers.append(relay)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        forwarder.connect_unix(_pod_socket(tmp_path, relay), 1.0)
    # Each try is cut to what is left of the patience: not one 10 s dial for a 1 s patience.
    assert time.monotonic() - started < 5
    assert relay.connections >= 1


def test_a_pod_network_not_routed_yet_is_tried_again(tmp_path: Path, relay_answers: list[FakeRelay],
                                                      monkeypatch) -> None:
    relay = FakeRelay(["ok"])
    relay_answers.append(relay)
    real = socket.create_connection
    failures = [errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNRESET]

    def not_yet(*args: object, **kwargs: object) -> socket.socket:
        if failures:
            code = failures.pop(0)
            raise OSError(code, errno.errorcode[code])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "create_connection", not_yet)
    sock = forwarder.connect_unix(_pod_socket(tmp_path, relay), 5.0)
    assert not failures
    assert _round_trip(sock, b"hello") == b"HELLO"


def test_a_relay_refusal_is_not_tried_again(tmp_path: Path, relay_answers: list[FakeRelay]) -> None:
    relay = FakeRelay(["refuse", "ok"])
    relay_answers.append(relay)
    with pytest.raises(controller_link.LinkError, match="refused unknown or expired token"):
        forwarder.connect_unix(_pod_socket(tmp_path, relay), 5.0)
    assert relay.connections == 1


def test_the_connected_socket_keeps_the_callers_timeout_not_the_tries(tmp_path: Path,
                                                                       relay_answers: list[FakeRelay]) -> None:
    relay = FakeRelay(["ok"])
    relay_answers.append(relay)
    sock = forwarder.connect_unix(_pod_socket(tmp_path, relay), 5.0)
    with sock:
        assert sock.gettimeout() is None  # the forwarder's pumps block: a quiet model stream is not an error
