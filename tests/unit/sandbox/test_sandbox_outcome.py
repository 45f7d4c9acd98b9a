"""How an exec ended, classified from the facts Docker gives (no Docker).

The probe outputs and exit codes below were captured from the real daemon
(engine 20.10, cgroup v1) running the sandbox image; the cgroup v2 files
follow the kernel's documented format.
"""

from __future__ import annotations

import pytest

from agent_eval_sandbox.sandbox.base import EndReason
from agent_eval_sandbox.sandbox.outcome import (
    CgroupCounters,
    classify_end,
    host_cgroup_files,
    parse_probe,
    probe_lines,
    signal_of,
)

# `grep -sH . <PROBE_FILES>` after a python memory hog was OOM-killed (memory=128m).
V1_AFTER_OOM = (
    "/sys/fs/cgroup/memory/memory.oom_control:oom_kill_disable 0\n"
    "/sys/fs/cgroup/memory/memory.oom_control:under_oom 0\n"
    "/sys/fs/cgroup/memory/memory.oom_control:oom_kill 1\n"
    "/sys/fs/cgroup/pids/pids.events:max 0\n"
)
# ... and after `bash -c ':(){ :|:& };:'` with pids_limit=64.
V1_AFTER_BOMB = (
    "/sys/fs/cgroup/memory/memory.oom_control:oom_kill_disable 0\n"
    "/sys/fs/cgroup/memory/memory.oom_control:under_oom 0\n"
    "/sys/fs/cgroup/memory/memory.oom_control:oom_kill 0\n"
    "/sys/fs/cgroup/pids/pids.events:max 305\n"
)
# cgroup v2: memory.events also has a "max" key (memory.max hits), which is not the pids one.
V2 = (
    "/sys/fs/cgroup/memory.events:low 0\n"
    "/sys/fs/cgroup/memory.events:high 0\n"
    "/sys/fs/cgroup/memory.events:max 57\n"
    "/sys/fs/cgroup/memory.events:oom 3\n"
    "/sys/fs/cgroup/memory.events:oom_kill 2\n"
    "/sys/fs/cgroup/pids.events:max 7\n"
)
# What exec_start returned when the pids table was full: the probe could not start.
PROBE_REFUSED = (
    "OCI runtime exec failed: exec failed: unable to start container process: "
    "read init-p: connection reset by peer: unknown\r\n"
)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (V1_AFTER_OOM, CgroupCounters(oom_kills=1, pids_refused=0)),
        (V1_AFTER_BOMB, CgroupCounters(oom_kills=0, pids_refused=305)),
        (V2, CgroupCounters(oom_kills=2, pids_refused=7)),
        ("/sys/fs/cgroup/pids/pids.events:max 4\n", CgroupCounters(oom_kills=0, pids_refused=4)),
        (PROBE_REFUSED, None),
        ("", None),
    ],
)
def test_parse_probe(output, expected):
    assert parse_probe(output) == expected


@pytest.mark.parametrize(
    ("exit_code", "deadline_hit", "oom_kills", "expected"),
    [
        # Exit codes seen from the daemon's exec_inspect for each case:
        (0, False, 0, (EndReason.EXITED, None)),  # true
        (3, False, 0, (EndReason.EXITED, None)),  # sh -c 'exit 3'
        (126, False, 0, (EndReason.EXITED, None)),  # no-such-binary: OCI runtime exec failed
        (143, False, 0, (EndReason.SIGNALED, 15)),  # sh -c 'kill -TERM $$'
        (137, False, 1, (EndReason.OOM_KILLED, 9)),  # memory hog, oom_kill 0 -> 1
        (137, False, 0, (EndReason.SIGNALED, 9)),  # kill -9 by someone, no OOM
        (0, False, 1, (EndReason.EXITED, None)),  # a child was OOM-killed, the command carried on
        (137, False, None, (EndReason.SIGNALED, 9)),  # counters unknown: do not guess OOM
        (None, True, None, (EndReason.TIMED_OUT, None)),  # frozen at the deadline
        (137, True, 0, (EndReason.TIMED_OUT, None)),  # killed by kill_exec at the deadline
    ],
)
def test_classify_end(exit_code, deadline_hit, oom_kills, expected):
    assert classify_end(exit_code=exit_code, deadline_hit=deadline_hit, oom_kills=oom_kills) == expected


def test_no_exit_code_without_a_deadline_is_a_programming_error():
    with pytest.raises(ValueError):
        classify_end(exit_code=None, deadline_hit=False, oom_kills=0)


def test_signal_of():
    assert signal_of(130) == 2
    assert signal_of(128) is None
    assert signal_of(255) is None
    assert signal_of(1) is None


def test_host_cgroup_files_read_as_the_probe_prints_them(tmp_path):
    cid = "ab" * 32
    memory, pids = host_cgroup_files(cid, root=str(tmp_path))[0]
    assert memory == f"{tmp_path}/memory/docker/{cid}/memory.oom_control"
    assert pids == f"{tmp_path}/pids/docker/{cid}/pids.events"
    text = probe_lines(memory, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n") + probe_lines(pids, "max 5\n")
    assert parse_probe(text) == CgroupCounters(oom_kills=2, pids_refused=5)
    # every layout names one memory file and one pids file of that container
    for memory, pids in host_cgroup_files(cid):
        assert cid in memory and cid in pids
        assert memory.endswith(("memory.oom_control", "memory.events")) and pids.endswith("pids.events")


def test_a_forged_lower_counter_line_cannot_hide_the_real_one():
    """A process the agent left behind once wrote `oom_kill 0` lines into the probe's output after the real
    ones (the last line won): the counters only grow, so the highest figure stands."""
    real = "/sys/fs/cgroup/memory.events:oom_kill 1\n/sys/fs/cgroup/pids.events:max 7\n"
    forged = "/sys/fs/cgroup/memory.events:oom_kill 0\n/sys/fs/cgroup/pids.events:max 0\n"
    assert parse_probe(real + forged) == CgroupCounters(oom_kills=1, pids_refused=7)
