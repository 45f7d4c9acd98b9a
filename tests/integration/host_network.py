"""This host's own addresses, and listeners on them, for "nothing is reachable" tests.

Network attacks in the tests target only addresses of this machine: a listener
of the test's own on the docker bridge gateway and on every interface address.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def host_ipv4_addresses() -> list[str]:
    """Every IPv4 address of this host's interfaces (incl. docker0 and loopback)."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    addresses = [line.split()[3].split("/")[0] for line in out.splitlines() if len(line.split()) > 3]
    assert "127.0.0.1" in addresses, out
    return addresses


class Listener:
    """TCP listeners on the given addresses that record any connection."""

    def __init__(self, addresses: list[str]) -> None:
        self.sockets = [socket.create_server((address, 0)) for address in addresses]
        self.targets: list[tuple[str, int]] = [s.getsockname()[:2] for s in self.sockets]
        self.connections: list[tuple[str, int]] = []
        for sock in self.sockets:
            sock.settimeout(0.5)
            threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, peer = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(peer)
            conn.close()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@contextmanager
def listening_on_host() -> Iterator[Listener]:
    listener = Listener(host_ipv4_addresses())
    try:
        yield listener
    finally:
        listener.close()
