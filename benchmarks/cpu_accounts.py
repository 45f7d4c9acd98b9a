"""Who spent a run's CPU: the machine's busy time split by the kernel's own counters.

`perf.py budget` reads these before and after a run: the machine (`/proc/stat`),
every container of Docker's (the cgroup Docker puts them under, which keeps what a
removed container spent), `dockerd` and `containerd` (their own time and their
reaped children's), this process's reaped children (the `run` commands, the host
CLIs) and this process itself (its samplers). What is left is the containerd shims,
runc, and the kernel's own threads.

`ContainerProcesses` splits the containers' share by process: it polls their
cgroups' processes and keeps each one's last reading. A process's time after its
last poll, its exit (a CLI freeing its heap) and processes shorter than a poll are
not seen there; they stay in the containers' total.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Generic, Self, TypeVar

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
T = TypeVar("T")

# The cgroup Docker's cgroupfs driver puts its containers under, v1 and v2. The systemd driver puts them
# beside every other service in system.slice, where they cannot be told apart once removed.
DOCKER_CGROUPS_V1 = Path("/sys/fs/cgroup/cpuacct/docker")
DOCKER_CGROUPS_V2 = Path("/sys/fs/cgroup/docker")


def machine_busy_s() -> float:
    """CPU-seconds every core spent busy since boot (all but idle and iowait)."""
    with open("/proc/stat") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) * _TICK_S


def containers_cgroup() -> Path | None:
    for path in (DOCKER_CGROUPS_V1, DOCKER_CGROUPS_V2):
        if path.is_dir():
            return path
    return None


def cgroup_cpu_s(cgroup: Path) -> float:
    """A cgroup's CPU-seconds, its removed children's included."""
    v1 = cgroup / "cpuacct.usage"
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for line in (cgroup / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise ValueError(f"no CPU usage in {cgroup}")


def stat_cpu_s(stat_line: str, *, with_children: bool) -> float:
    """utime + stime (+ the reaped children's) of one `/proc/<pid>/stat` line."""
    after_name = stat_line.rsplit(")", 1)[1].split()
    ticks = int(after_name[11]) + int(after_name[12])
    if with_children:
        ticks += int(after_name[13]) + int(after_name[14])
    return ticks * _TICK_S


_daemon_pids: dict[str, str] = {}


def _daemon_pid(name: str) -> str | None:
    known = _daemon_pids.get(name)
    with contextlib.suppress(OSError):
        if known is not None and Path(f"/proc/{known}/comm").read_text().rstrip("\n") == name:
            return known
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if (entry / "comm").read_text().rstrip("\n") == name:
                _daemon_pids[name] = entry.name
                return entry.name
    return None


def _process_cpu_s(pid: int | str) -> float | None:
    """A process's CPU-seconds with its reaped children's; None when it is gone."""
    try:
        return stat_cpu_s(Path(f"/proc/{pid}/stat").read_text(), with_children=True)
    except OSError:
        return None


def daemon_cpu_s(name: str) -> float | None:
    """A daemon's CPU-seconds and its reaped children's, by its exact process name; None if not running.

    It reads `/proc` rather than run `pgrep`: a child of this process would count as the controller's."""
    pid = _daemon_pid(name)
    return None if pid is None else _process_cpu_s(pid)


def live_cpu_s(pids: Iterable[int]) -> float:
    """What running children have spent so far, with their own reaped children (a child not yet reaped
    is not in RUSAGE_CHILDREN); one gone meanwhile counts nothing."""
    return sum(spent or 0.0 for spent in map(_process_cpu_s, pids))


def _rusage_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class CpuReading:
    """CPU-seconds so far, by who spent them; a part that cannot be read here is None."""

    machine: float
    containers: float | None
    dockerd: float | None
    containerd: float | None
    children: float
    own: float

    @classmethod
    def now(cls, live_children: Iterable[int] = ()) -> CpuReading:
        """`live_children`: this process's children still running, whose time counts with the reaped ones'
        (readings taken while a child runs would not see it otherwise)."""
        cgroup = containers_cgroup()
        return cls(
            machine=machine_busy_s(),
            containers=cgroup_cpu_s(cgroup) if cgroup is not None else None,
            dockerd=daemon_cpu_s("dockerd"),
            containerd=daemon_cpu_s("containerd"),
            children=_rusage_s(resource.RUSAGE_CHILDREN) + live_cpu_s(live_children),
            own=_rusage_s(resource.RUSAGE_SELF),
        )

    def since(self, earlier: CpuReading) -> CpuSpent:
        return _difference(self, earlier)


@dataclass(frozen=True)
class CpuSpent:
    """CPU-seconds spent over a stretch, by who spent them (the fields of `CpuReading`)."""

    machine: float | None
    containers: float | None
    dockerd: float | None
    containerd: float | None
    children: float | None
    own: float | None

    @property
    def machine_but_own(self) -> float | None:
        """The machine's busy time but this process's (what the work measured cost, not its measuring)."""
        return None if self.machine is None or self.own is None else self.machine - self.own

    @property
    def rest(self) -> float | None:
        """The machine's time no part accounts for: shims, runc, kernel threads, other processes.
        None when a part could not be read (it would hide in here)."""
        parts = [self.containers, self.dockerd, self.containerd, self.children, self.own]
        if self.machine is None or any(p is None for p in parts):
            return None
        return self.machine - sum(p for p in parts if p is not None)

    def minus(self, other: CpuSpent) -> CpuSpent:
        """What this stretch spent beyond `other` (a longer run's spend beyond a shorter one's)."""
        return _difference(self, other)

    def per(self, count: int) -> CpuSpent:
        return CpuSpent(**{f.name: (None if getattr(self, f.name) is None else getattr(self, f.name) / count)
                           for f in fields(CpuSpent)})


def _difference(later: CpuReading | CpuSpent, earlier: CpuReading | CpuSpent) -> CpuSpent:
    """Part by part (the two classes share their fields); a part either side could not read is None."""
    def delta(name: str) -> float | None:
        mine, theirs = getattr(later, name), getattr(earlier, name)
        return None if mine is None or theirs is None else mine - theirs

    return CpuSpent(**{f.name: delta(f.name) for f in fields(CpuSpent)})


class Poller:
    """Calls `poll()` every `interval_s` in a thread of its own, from entering a `with` to leaving it."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self._interval_s)

    def poll(self) -> None:
        raise NotImplementedError


class Samples(Poller, Generic[T]):
    """`read()` every `interval_s` with the time it was read, to read any stretch of time afterwards."""

    def __init__(self, read: Callable[[], T], interval_s: float = 0.02) -> None:
        super().__init__(interval_s)
        self._read = read
        self._samples: list[tuple[float, T]] = []

    def poll(self) -> None:
        self._samples.append((time.time(), self._read()))

    def around(self, start: float, end: float) -> tuple[T, T]:
        """The readings nearest `start` and `end` (epoch seconds, to a sample's interval)."""
        samples = list(self._samples)
        first = min(samples, key=lambda sample: abs(sample[0] - start))
        last = min(samples, key=lambda sample: abs(sample[0] - end))
        return first[1], last[1]


class CpuSampler(Samples[CpuReading]):
    """A `CpuReading` every `interval_s`, to read what any stretch of time spent afterwards (the span of a
    run's cases, say). Add a child's pid to `live_children` while it runs."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.live_children: set[int] = set()
        super().__init__(lambda: CpuReading.now(tuple(self.live_children)), interval_s)

    def spent(self, start: float, end: float) -> CpuSpent:
        """What was spent from `start` to `end` (epoch seconds, to a sample's interval)."""
        first, last = self.around(start, end)
        return last.since(first)


def process_label(exe: str, argv: list[str]) -> str:
    """What a process in a sandbox is, for the split: its program, and for an interpreter its script."""
    name = os.path.basename(exe)
    script = next((os.path.basename(a) for a in argv[1:] if a.endswith(".py")), None)
    return f"{name} {script}" if script and name.startswith("python") else name


class ContainerProcesses(Poller):
    """Polls the processes of every container under `cgroup` every `interval_s`, keeping each one's last
    CPU reading (its dead threads' included) and what it last was (a process that execs is counted as what
    it became)."""

    def __init__(self, cgroup: Path, interval_s: float = 0.01) -> None:
        super().__init__(interval_s)
        self._cgroup = cgroup
        self._last: dict[tuple[str, str], tuple[str, float]] = {}  # (container, pid) -> (label, CPU-seconds)

    def poll(self) -> None:
        for container in self._cgroup.iterdir():
            if not container.is_dir():
                continue
            try:
                pids = (container / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    exe = os.readlink(f"/proc/{pid}/exe")
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                except OSError:
                    continue
                self._last[(container.name, pid)] = (process_label(exe, argv), stat_cpu_s(stat, with_children=False))

    def by_label(self) -> dict[str, float]:
        """CPU-seconds seen, summed by what the processes were."""
        return group_by_label(self._last.values())


def group_by_label(readings: Iterable[tuple[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for label, seconds in readings:
        totals[label] += seconds
    return dict(sorted(totals.items(), key=lambda item: -item[1]))
