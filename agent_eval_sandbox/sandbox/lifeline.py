"""A sandbox's lifeline: its main process waits on a stdin that only its controller holds open.

The container's command is `head -c 1` as `nobody`, created with stdin open and
closed when its first attached client goes (Docker's StdinOnce). The controller
attaches to that stdin before it starts the container and never writes to it.
When the controller lets go — `close()`, or its process ends however it ends
(kill -9 included: the kernel closes the connection) — the daemon closes the
container's stdin, `head` reads end-of-file and exits, docker-init exits with it
and the container stops, taking every process of the agent along. So a
sandbox never keeps running without its controller.

A compiled program rather than a Python one: no interpreter to start in every
sandbox (~25 ms of the machine's CPU a sandbox, benchmarks/lifecycle.py), and
nothing of it on the host's file system or mounted into the sandbox.
"""

from __future__ import annotations

import threading
from typing import Any

import docker

from agent_eval_sandbox.sandbox.docker_errors import close_stream

# The main process runs as `nobody`: the agent's user cannot signal, stop or trace it.
MAIN_USER = "65534:65534"
# Exits at end of input; the controller never writes, so it exits only when the controller goes.
MAIN_COMMAND = ("head", "-c", "1")


class Lifeline:
    """The controller's end: a stream attached to the stdin of a created container's main process."""

    def __init__(self, sock: Any) -> None:
        self._sock: Any = sock
        self._lock = threading.Lock()

    @classmethod
    def attach(cls, api: docker.APIClient, container_id: str) -> Lifeline:
        """Attach to the container's stdin; before `start`, so that no moment of its life is unheld.

        The connection is hijacked from the SDK's pool and never goes back to it."""
        return cls(api.attach_socket(container_id, params={"stdin": 1, "stream": 1}))

    def close(self) -> None:
        """Let go: the container's main process ends (idempotent)."""
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is None:
            return
        close_stream(sock)

