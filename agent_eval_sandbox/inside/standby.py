"""The launcher on standby: started ahead of its case, it waits for the rest of its command on stdin.

Standard library only, no imports of ours: `run_agent.py` reads the go line in
the sandbox; the host writes it (`agent_eval_sandbox.inside.standby`).

A sandbox made ahead of its case (sandbox/pool.py) also starts its launcher
ahead, as `LAUNCHER --standby`, so that the case's agent does not wait for a
`docker exec` and a Python start. When the case runs, the host writes one
line on that process's stdin, then closes it:

    {"argv": [...], "env": {...}, "cwd": "/workspace"}

and the launcher goes on exactly as `LAUNCHER argv...` started with `env`
added to its environment and `cwd` as its directory would. End of input
without a line means the case never ran its agent here: the launcher exits 0
and starts nothing.

Only the controller holds that stdin: the launcher makes itself non-dumpable
before it reads it, so nothing else of the sandbox user's can reach it through
/proc.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import BinaryIO

FLAG = "--standby"
# The argv and environment of `claude -p` with its flags and plugin dirs; far more is not a go line.
MAX_LINE_BYTES = 1024 * 1024


class GoLineError(ValueError):
    """The line on the launcher's stdin is not a go line."""


@dataclass(frozen=True)
class Go:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None


def encode(argv: list[str], env: dict[str, str], cwd: str | None) -> bytes:
    line = json.dumps({"argv": list(argv), "env": dict(env), "cwd": cwd}, separators=(",", ":")).encode() + b"\n"
    if len(line) > MAX_LINE_BYTES:
        raise GoLineError(f"the go line is {len(line)} bytes, more than {MAX_LINE_BYTES}")
    return line


def read(stream: BinaryIO) -> Go | None:
    """The go line from `stream`; None at end of input (the case never started its agent here)."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise GoLineError("the go line ended before its newline" if len(line) <= MAX_LINE_BYTES
                          else f"the go line is longer than {MAX_LINE_BYTES} bytes")
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise GoLineError(f"the go line is not JSON: {exc}") from None
    argv, env, cwd = (data.get(key) for key in ("argv", "env", "cwd")) if isinstance(data, dict) else (None,) * 3
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise GoLineError("the go line's argv is not a list of strings")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise GoLineError("the go line's env is not a mapping of strings")
    if cwd is not None and not isinstance(cwd, str):
        raise GoLineError("the go line's cwd is not a string")
    return Go(argv, env, cwd)
