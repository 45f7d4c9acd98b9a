"""The sandbox's hardened defaults, defined once: `Limits`/`Hardening` and eval.yaml's `sandbox:` block use them.

No imports of ours: the config models and the backends both read it.
"""

from __future__ import annotations

import re
from typing import Final

CPUS = 1.0
MEMORY = "2g"  # no swap; the tmpfs sizes count against it once filled
PIDS = 512
DISK = "1g"  # the writable /workspace
TMP_SIZE = "256m"
HOME_SIZE = "256m"  # $HOME holds the session transcript
USER = "1000:1000"  # non-root; numeric uid[:gid]
READ_ONLY_ROOT = True
NO_NEW_PRIVILEGES = True
CAP_DROP = ("ALL",)
CAP_ADD: tuple[str, ...] = ()
INIT = True
NETWORK: Final = "none"  # Final: its type is the literal, which eval.yaml's `sandbox.network` allows alone
MIN_PIDS = 16

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(value: str | int) -> int:
    """'512m', '2g', '1GiB', '1048576' -> bytes (binary multiples, like Docker)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use e.g. 512m or 2g)")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * 1024 ** " kmgt".index(unit or " "))
