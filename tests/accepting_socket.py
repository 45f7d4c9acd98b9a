"""A unix socket that takes every connection and closes it: a gateway that is there, for the launcher's check."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def accepting_unix_socket(path: Path, *, mode: int | None = None) -> Iterator[Path]:
    """Listen at `path` (chmod `mode`, for another user's connections) until the block ends."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    if mode is not None:
        os.chmod(path, mode)
    server.listen(16)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield path
    finally:
        server.close()
