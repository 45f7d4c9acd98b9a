"""Unix sockets the host serves to sandboxes (the model gateway, the hook broker)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
