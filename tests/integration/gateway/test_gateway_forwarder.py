"""forwarder.py as the container runs it: a separate python process, stdlib only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent_eval_sandbox.inside.forwarder as forwarder_module

FORWARDER = Path(forwarder_module.__file__)


class EchoUnixServer:
    """Echoes what it reads; on EOF, sends a trailer and closes (tests half-close)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
            conn.sendall(b"<after-eof>")


@pytest.fixture
def echo_forwarder(tmp_path: Path, start_forwarder) -> Iterator[tuple[str, int]]:
    path = tmp_path / "echo.sock"
    server = EchoUnixServer(path)
    url = start_forwarder(path)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    yield host, int(port)
    server.sock.close()


def _exchange(address: tuple[str, int], payload: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as conn:
        sender = threading.Thread(target=lambda: (conn.sendall(payload), conn.shutdown(socket.SHUT_WR)))
        sender.start()
        received = bytearray()
        while chunk := conn.recv(65536):
            received += chunk
        sender.join()
    return bytes(received)


def test_bytes_pass_both_ways_and_the_reply_survives_a_half_close(echo_forwarder):
    assert _exchange(echo_forwarder, b"hello") == b"hello<after-eof>"


def test_large_payloads_pass_intact(echo_forwarder):
    payload = os.urandom(8 * 1024 * 1024)
    assert _exchange(echo_forwarder, payload) == payload + b"<after-eof>"


def test_connections_are_independent(echo_forwarder):
    results: dict[int, bytes] = {}

    def one(i: int) -> None:
        results[i] = _exchange(echo_forwarder, f"conn-{i}-".encode() * 1000)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[i] == f"conn-{i}-".encode() * 1000 + b"<after-eof>" for i in range(20))


def test_a_socket_that_appears_late_is_waited_for_and_the_forwarder_carries_on(tmp_path, start_forwarder):
    """A connection made while the gateway socket is not there yet is held, not closed (the CLI would
    read the close as ECONNRESET); the forwarder gives up only after its patience (unit-tested)."""
    path = tmp_path / "later.sock"
    url = start_forwarder(path)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    servers: list[EchoUnixServer] = []
    threading.Timer(1.0, lambda: servers.append(EchoUnixServer(path))).start()
    assert _exchange((host, int(port)), b"anyone?") == b"anyone?<after-eof>"
    assert _exchange((host, int(port)), b"now") == b"now<after-eof>"
    servers[0].sock.close()


def test_bad_arguments_exit_with_usage():
    proc = subprocess.run(
        [sys.executable, "-I", str(FORWARDER), "--listen", "nope", "--unix", "/x"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2 and "HOST:PORT" in proc.stderr


def test_the_forwarder_needs_only_the_standard_library():
    def imports(path):
        return {line.split()[1].split(".")[0] for line in path.read_text().splitlines()
                if line.startswith(("import ", "from "))}

    # controller_link is its sibling in the image (how a Kubernetes Pod reaches the relay).
    assert imports(FORWARDER) <= {"__future__", "argparse", "contextlib", "errno", "os", "socket", "sys", "threading",
                                  "time", "typing", "controller_link"}
    assert imports(FORWARDER.parent / "controller_link.py") <= {"__future__", "json", "os", "socket"}
