"""Labels and names of every backend object, and who may remove them (pure).

Every container and volume carries the run id, the case id, its owner and a
deadline. The owner is `<hostname>:<pid>:<process start time>`: the start
time (from /proc/<pid>/stat) tells a live owner from a recycled pid. An object
is an orphan when its owner on this host is gone, or, on any host, when its
deadline passed more than a grace period ago.

A controller running in a container of the same daemon also labels its objects
with that container's id: pids and hostnames mean nothing across pid and UTS
namespaces (a `--network host` container even shares the host's hostname), so
such an owner is checked by asking the daemon whether its container still runs.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

PREFIX = "agent-eval-sandbox"
MANAGED = f"{PREFIX}.managed"
RUN_ID = f"{PREFIX}.run-id"
CASE_ID = f"{PREFIX}.case-id"
OWNER = f"{PREFIX}.owner"
DEADLINE = f"{PREFIX}.deadline"
ROLE = f"{PREFIX}.role"  # what a volume holds: "workspace" | "home"
CONTAINER = f"{PREFIX}.controller-container"  # the id of the container the owner runs in, if any

MANAGED_FILTER = f"{MANAGED}=1"
# How long past its deadline an object of a live (or foreign) owner is kept.
DEFAULT_GRACE_S = 300.0


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start_time: int  # clock ticks since boot, field 22 of /proc/<pid>/stat

    def label(self) -> str:
        return f"{self.host}:{self.pid}:{self.start_time}"


def parse_owner(value: str | None) -> Owner | None:
    if not value:
        return None
    host, _, rest = value.partition(":")
    pid, _, start = rest.partition(":")
    if not host or not pid.isdigit() or not start.isdigit():
        return None
    return Owner(host, int(pid), int(start))


def parse_start_time(stat_line: str) -> int:
    """Field 22 of a /proc/<pid>/stat line (the command name may hold spaces and ')')."""
    fields = stat_line.rsplit(")", 1)[1].split()
    return int(fields[19])  # fields[0] is field 3 (state)


def proc_start_time(pid: int) -> int | None:
    """Start time of a live local process, or None if there is none with that pid."""
    try:
        return parse_start_time(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def current_owner() -> Owner:
    start = proc_start_time(os.getpid())
    assert start is not None, "/proc/self/stat is unreadable"
    return Owner(socket.gethostname(), os.getpid(), start)


def object_labels(
    *, run_id: str, case_id: str, owner: Owner, deadline_epoch: float, extra: Mapping[str, str] = {},
    container: str | None = None,
) -> dict[str, str]:
    """`container`: the id of the container the owner process runs in (None on the daemon's host)."""
    labels = {
        **extra,
        MANAGED: "1",
        RUN_ID: run_id,
        CASE_ID: case_id,
        OWNER: owner.label(),
        DEADLINE: str(int(deadline_epoch)),
    }
    if container:
        labels[CONTAINER] = container
    else:
        labels.pop(CONTAINER, None)
    return labels


def orphan_reason(
    labels: Mapping[str, str],
    *,
    now: float,
    hostname: str,
    start_time_of: Callable[[int], int | None],
    grace_s: float = DEFAULT_GRACE_S,
    own_container: str | None = None,
    container_running: Callable[[str], bool] | None = None,
) -> str | None:
    """Why an object may be reaped, or None to keep it.

    `own_container`: the id of the container the reaper runs in (None on the
    daemon's host); the pid check applies only to owners in the same one.
    `container_running(id)` asks the daemon about an owner's container.
    Objects with unreadable labels are kept: only `gc --all` removes them.
    """
    owner = parse_owner(labels.get(OWNER))
    container = labels.get(CONTAINER) or None
    if container != own_container:
        if container is not None and container_running is not None and not container_running(container):
            return f"controller container {container[:12]} is gone"
    elif owner is not None and owner.host == hostname and start_time_of(owner.pid) != owner.start_time:
        return f"owner process {owner.pid} on {owner.host} is gone"
    try:
        deadline = float(labels.get(DEADLINE, ""))
    except ValueError:
        return None
    if now > deadline + grace_s:
        return f"deadline passed {int(now - deadline)} s ago"
    return None


_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


def object_name(run_id: str, case_id: str) -> str:
    """A readable, unique Docker name: aes-<run>-<case>-<random>."""
    run = _UNSAFE.sub("-", run_id).strip("-.")[:40] or "run"
    case = _UNSAFE.sub("-", case_id).strip("-.")[:60] or "case"
    return f"aes-{run}-{case}-{secrets.token_hex(3)}"
