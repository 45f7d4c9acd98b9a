"""The sandbox's main process: it lives exactly as long as its controller.

Standard library only (the image's python3). The Docker backend starts the
container with this as its command, as a user other than the sandbox user
(so the agent cannot signal or stop it):

    python3 -I /opt/agent-eval/lifeline.py /run/agent-eval-lifeline/lifeline.sock

It connects to a unix socket the controller listens on (and never accepts
from: the connection waits in the listener's backlog) and blocks reading it.
When the controller's process ends, however it ends (kill -9 included), the
kernel closes the listener and resets the connection; this process exits,
docker-init exits with it and the container stops, taking every process of
the agent along. So a sandbox never keeps running without its controller.
"""

from __future__ import annotations

import socket
import sys
import time

CONNECT_TIMEOUT_S = 10.0
EXIT_NO_CONTROLLER = 3


def connect(path: str, timeout_s: float = CONNECT_TIMEOUT_S) -> socket.socket | None:
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def wait_for_controller_to_go(sock: socket.socket) -> None:
    while True:
        try:
            if not sock.recv(4096):
                return
        except InterruptedError:
            continue
        except OSError:
            return


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: lifeline.py SOCKET", file=sys.stderr)
        return 2
    sock = connect(argv[1])
    if sock is None:
        print(f"lifeline: no controller at {argv[1]}; stopping the sandbox", file=sys.stderr, flush=True)
        return EXIT_NO_CONTROLLER
    wait_for_controller_to_go(sock)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
