"""`perf.py budget`'s accounts: the kernel's counters read right, and the split adds up.

The figures only show when someone reruns the benchmark; a misread field would
quietly move CPU from one part to another."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def accounts() -> ModuleType:
    from benchmarks import cpu_accounts

    return cpu_accounts


def _stat_line(comm: str, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
    return f"42 ({comm}) S 1 42 42 0 -1 4194560 10 20 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 100"


def test_a_stat_line_s_times_are_read_past_a_name_with_spaces_and_parentheses(accounts: ModuleType) -> None:
    tick = 1 / os.sysconf("SC_CLK_TCK")
    line = _stat_line("a) b (c", 7, 3, 100, 50)
    assert accounts.stat_cpu_s(line, with_children=False) == pytest.approx(10 * tick)
    assert accounts.stat_cpu_s(line, with_children=True) == pytest.approx(160 * tick)


def test_this_process_s_own_stat_line_reads_as_its_cpu_time(accounts: ModuleType) -> None:
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass
    read = accounts.stat_cpu_s(Path(f"/proc/{os.getpid()}/stat").read_text(), with_children=False)
    assert read == pytest.approx(time.process_time(), abs=0.05)


def test_a_cgroup_s_usage_is_read_in_either_version(accounts: ModuleType, tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v1.mkdir()
    v2.mkdir()
    (v1 / "cpuacct.usage").write_text("2500000000\n")
    (v2 / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert accounts.cgroup_cpu_s(v1) == pytest.approx(2.5)
    assert accounts.cgroup_cpu_s(v2) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="no CPU usage"):
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "cpu.stat").write_text("nr_periods 0\n")
        accounts.cgroup_cpu_s(tmp_path / "empty")


def test_the_split_adds_up_and_a_part_not_read_is_not_hidden_in_the_rest(accounts: ModuleType) -> None:
    spent = accounts.CpuSpent(machine=10.0, containers=6.0, dockerd=1.0, containerd=0.5, children=1.5, own=0.25)
    assert spent.rest == pytest.approx(0.75)
    assert spent.machine_but_own == pytest.approx(9.75)
    unread = accounts.CpuSpent(machine=10.0, containers=None, dockerd=1.0, containerd=0.5, children=1.5, own=0.25)
    assert unread.rest is None
    assert unread.machine_but_own == pytest.approx(9.75)


def test_a_longer_run_s_spend_beyond_a_shorter_one_s_divides_into_cases(accounts: ModuleType) -> None:
    short = accounts.CpuSpent(machine=4.0, containers=2.0, dockerd=0.4, containerd=0.2, children=1.0, own=0.1)
    long = accounts.CpuSpent(machine=16.0, containers=8.0, dockerd=1.6, containerd=0.8, children=1.6, own=0.4)
    per_case = long.minus(short).per(12)
    assert per_case.machine == pytest.approx(1.0)
    assert per_case.containers == pytest.approx(0.5)
    assert per_case.children == pytest.approx(0.05)
    assert per_case.rest == pytest.approx((12.0 - 6.0 - 1.2 - 0.6 - 0.6 - 0.3) / 12)


def test_readings_taken_apart_say_what_was_spent_between_them(accounts: ModuleType) -> None:
    before = accounts.CpuReading.now()
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass
    spent = accounts.CpuReading.now().since(before)
    assert spent.own >= 0.25
    assert spent.machine >= 0.25  # the machine was busy at least while this process was
    assert spent.children == 0


def test_a_process_is_labelled_by_its_program_and_an_interpreter_by_its_script(accounts: ModuleType) -> None:
    assert accounts.process_label("/usr/local/bin/claude", ["claude", "--print"]) == "claude"
    assert accounts.process_label("/usr/bin/python3.11",
                                  ["python3", "-I", "-S", "/opt/agent-eval/hook_client.py", "--x"]) \
        == "python3.11 hook_client.py"
    assert accounts.process_label("/usr/bin/bash", ["bash", "-c", "python3 x.py"]) == "bash"


def test_the_poll_follows_the_processes_a_cgroup_lists(accounts: ModuleType, tmp_path: Path) -> None:
    """A stand-in for Docker's cgroup that lists this process: the poll finds it and keeps its last reading."""
    container = tmp_path / "abc123"
    container.mkdir()
    (container / "cgroup.procs").write_text(f"{os.getpid()}\n")
    (tmp_path / "cpuacct.usage").write_text("0\n")  # a file beside the containers is not one of them
    with accounts.ContainerProcesses(tmp_path, interval_s=0.01) as processes:
        started = time.process_time()
        while time.process_time() - started < 0.3:
            pass
        time.sleep(0.05)
    seen = processes.by_label()
    assert list(seen) == [accounts.process_label(os.readlink("/proc/self/exe"), sys.argv)]
    assert list(seen.values())[0] >= 0.25


def test_labels_sum_over_processes_biggest_first(accounts: ModuleType) -> None:
    grouped = accounts.group_by_label([("claude", 0.5), ("docker-init", 0.02), ("claude", 0.25)])
    assert grouped == {"claude": 0.75, "docker-init": 0.02}
    assert list(grouped) == ["claude", "docker-init"]


def test_a_daemon_is_found_by_its_exact_name_without_a_child_process(accounts: ModuleType) -> None:
    comm = Path("/proc/self/comm").read_text().strip()
    before = accounts.CpuReading.now().children
    assert accounts.daemon_cpu_s(comm) is not None
    assert accounts.daemon_cpu_s("no-such-daemon-here") is None
    assert accounts.CpuReading.now().children == before


def test_a_running_child_s_time_counts_before_it_is_reaped(accounts: ModuleType) -> None:
    """Over the span of a run's cases its `run` process is still running: its time must show live."""
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time()-t<0.4: pass\ntime.sleep(30)"])
    try:
        time.sleep(1.0)
        before = accounts.CpuReading.now()
        live = accounts.CpuReading.now([child.pid])
        assert live.children - before.children >= 0.35
        assert accounts.live_cpu_s([child.pid]) >= 0.35
    finally:
        child.kill()
        child.wait()
    assert accounts.live_cpu_s([child.pid]) == 0  # gone: nothing, not an error


def test_the_sampler_reads_what_a_stretch_spent(accounts: ModuleType) -> None:
    with accounts.CpuSampler(interval_s=0.01) as sampler:
        time.sleep(0.1)
        start = time.time()
        started = time.process_time()
        while time.process_time() - started < 0.4:
            pass
        end = time.time()
        time.sleep(0.1)
    busy = sampler.spent(start, end)
    assert busy.own >= 0.3
    assert busy.machine >= 0.3
    idle = sampler.spent(end + 0.03, end + 0.09)
    assert idle.own < 0.05
