"""How a command in a sandbox ended, from the raw facts Docker gives (pure).

Docker reports an exec's exit code only; a process killed by signal n shows as
128+n. The memory cgroup's OOM killer ends a process with SIGKILL (137) and
leaves the container itself running (`State.OOMKilled` stays false), so OOM
kills are counted from the sandbox's own cgroup files, read by a probe command
after each exec. The pids limit never kills anything: it makes fork fail, and
the cgroup counts the refusals.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass

from agent_eval_sandbox.sandbox.base import EndReason

# cgroup v1 files first, then v2; whichever exist are printed as "path:key value".
PROBE_FILES = (
    "/sys/fs/cgroup/memory/memory.oom_control",
    "/sys/fs/cgroup/memory.events",
    "/sys/fs/cgroup/pids/pids.events",
    "/sys/fs/cgroup/pids.events",
)
# grep forks nothing, so the probe still runs when the pids limit is exhausted.
PROBE_CMD = ("grep", "-sH", ".", *PROBE_FILES)


def host_cgroup_files(container_id: str, root: str = "/sys/fs/cgroup") -> tuple[tuple[str, str], ...]:
    """(memory file, pids file) pairs where a runc container's cgroup may be on the daemon's host.

    The same counters the probe reads inside, without starting a command: for
    Docker's cgroupfs and systemd drivers, cgroup v1 and v2. A daemon with a
    cgroup parent of its own matches none of them (the probe is used then).
    """
    scope = f"system.slice/docker-{container_id}.scope"
    return (
        (f"{root}/memory/docker/{container_id}/memory.oom_control", f"{root}/pids/docker/{container_id}/pids.events"),
        (f"{root}/memory/{scope}/memory.oom_control", f"{root}/pids/{scope}/pids.events"),
        (f"{root}/docker/{container_id}/memory.events", f"{root}/docker/{container_id}/pids.events"),
        (f"{root}/{scope}/memory.events", f"{root}/{scope}/pids.events"),
    )


def probe_lines(path: str, text: str) -> str:
    """A cgroup file's content as the probe prints it (`path:line`), for `parse_probe`."""
    return "".join(f"{path}:{line}\n" for line in text.splitlines())


@dataclass(frozen=True)
class CgroupCounters:
    oom_kills: int
    pids_refused: int  # forks refused by the pids limit


def parse_probe(output: str) -> CgroupCounters | None:
    """Counters from the probe's output, or None if no known cgroup file was readable."""
    oom: int | None = None
    pids: int | None = None
    for line in output.splitlines():
        path, sep, rest = line.rpartition(":")
        key, _, value = rest.partition(" ")
        if not sep or not value.strip().isdigit():
            continue
        # The counters only grow: a line claiming less than another cannot hide what the other says
        # (whoever managed to write into the probe's output could only make things look worse).
        if path.endswith(("memory.oom_control", "memory.events")) and key == "oom_kill":
            oom = max(oom or 0, int(value))
        elif path.endswith("pids.events") and key == "max":
            pids = max(pids or 0, int(value))
    if oom is None and pids is None:
        return None
    return CgroupCounters(oom_kills=oom or 0, pids_refused=pids or 0)


def signal_of(exit_code: int) -> int | None:
    """The signal behind an exit code of 128+n (Docker's and the shells' convention)."""
    n = exit_code - 128
    return n if 0 < n < _signal.NSIG else None


def classify_end(*, exit_code: int | None, deadline_hit: bool, oom_kills: int | None) -> tuple[EndReason, int | None]:
    """(end reason, signal number) of one exec.

    A deadline wins over everything (the command did not end by itself). An
    exit by SIGKILL while the OOM counter rose is an OOM kill; an OOM kill of
    some other process in the sandbox (the command survived) is not.
    """
    if deadline_hit:
        return EndReason.TIMED_OUT, None
    if exit_code is None:
        raise ValueError("an exec that ended before its deadline has an exit code")
    sig = signal_of(exit_code)
    if sig == _signal.SIGKILL and oom_kills:
        return EndReason.OOM_KILLED, sig
    if sig is not None:
        return EndReason.SIGNALED, sig
    return EndReason.EXITED, None
