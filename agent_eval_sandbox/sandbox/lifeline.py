"""The host end of a sandbox's lifeline: a listening unix socket the sandbox's main process waits on.

The main process (`inside/lifeline.py`) connects and blocks; nothing here ever
accepts. When this process dies, for whatever reason, the kernel closes the
listener, the sandbox's main process sees the connection reset and exits, and
the container stops. One listener per sandbox, in a directory of its own that
is bind-mounted read-only into that sandbox only.
"""

from __future__ import annotations

import os
import select
import socket
import tempfile
import time
from pathlib import Path

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.sandbox.held_dirs import HeldDir

DIR_IN_SANDBOX = paths.LIFELINE_DIR
SOCKET_NAME = paths.LIFELINE_SOCKET_NAME
# The main process runs as `nobody`: the agent's user cannot signal, stop or trace it.
MAIN_USER = "65534:65534"


def main_command() -> list[str]:
    return ["python3", "-I", "-S", paths.LIFELINE, paths.LIFELINE_SOCKET]


class Lifeline:
    """A listener in a fresh directory; `close()` releases both (idempotent)."""

    def __init__(self, base_dir: Path | None = None) -> None:
        self._held = HeldDir(base_dir or Path(tempfile.gettempdir()), "aes-ll-")
        self.dir = self._held.path
        self._sock: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.dir.chmod(0o755)  # the sandbox's main process (another uid) must reach the socket
            self._sock.bind(str(self.dir / SOCKET_NAME))
            os.chmod(self.dir / SOCKET_NAME, 0o666)
            self._sock.listen(1)
        except BaseException:
            self.close()
            raise

    def wait_connected(self, timeout_s: float) -> bool:
        """True once the sandbox's main process has connected (its connection waits in the backlog)."""
        deadline = time.monotonic() + timeout_s
        while self._sock is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                readable, _, _ = select.select([self._sock], [], [], remaining)
            except InterruptedError:
                continue
            return bool(readable)
        return False

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        self._held.release()
