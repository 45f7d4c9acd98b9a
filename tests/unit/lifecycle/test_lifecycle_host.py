"""Host-scope hook processes: real bash, real process groups, real signals."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.lifecycle.host import (
    HostExecutor,
    run_on_host,
    stragglers,
)

GRACE_S = 0.5


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody reaped (PID 1 here does not reap orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def read_pid(path: Path, timeout_s: float = 5.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def run(tmp_path: Path, command: str, timeout_s: float = 5.0, env: dict[str, str] | None = None):
    log = tmp_path / "hook.log"
    with open(log, "wb", buffering=0) as handle:
        started = time.monotonic()
        outcome = run_on_host(
            command,
            cwd=tmp_path,
            env=env if env is not None else dict(os.environ),
            log=handle,
            timeout_s=timeout_s,
            kill_grace_s=GRACE_S,
        )
    return outcome, time.monotonic() - started, log.read_text()


def test_exit_code_and_combined_output(tmp_path):
    outcome, _, text = run(tmp_path, "echo out; echo err >&2; echo again; exit 7")
    assert outcome.exit_code == 7 and not outcome.timed_out and not outcome.ok
    assert text == "out\nerr\nagain\n"


def test_success(tmp_path):
    outcome, _, _ = run(tmp_path, "true")
    assert outcome.ok and outcome.exit_code == 0


def test_death_by_signal_reads_as_128_plus_n(tmp_path):
    outcome, _, _ = run(tmp_path, "kill -TERM $$")
    assert outcome.exit_code == 128 + signal.SIGTERM


def test_runs_in_cwd_with_env_and_no_stdin(tmp_path):
    outcome, _, text = run(tmp_path, 'pwd; echo "$ONLY_THIS"; cat; echo end', env={"ONLY_THIS": "x", "PATH": "/usr/bin:/bin"})
    assert outcome.ok
    assert text == f"{tmp_path}\nx\nend\n"


def test_own_session_and_process_group(tmp_path):
    outcome, _, text = run(tmp_path, "ps -o pid=,pgid=,sid= -p $$")
    pid, pgid, sid = text.split()
    assert pid == pgid == sid  # the hook leads a new session, not ours
    assert int(sid) != os.getsid(0)


def test_never_ending_hook_times_out_and_its_process_dies(tmp_path):
    outcome, elapsed, _ = run(tmp_path, "echo $$ > shell.pid; sleep 300", timeout_s=1)
    assert outcome.timed_out and outcome.exit_code is None and not outcome.ok
    assert elapsed < 1 + GRACE_S + 3
    assert not alive(read_pid(tmp_path / "shell.pid"))


def test_background_children_die_with_it_even_when_they_ignore_sigterm(tmp_path):
    command = (
        "echo $$ > shell.pid; "
        "sleep 300 & echo $! > child.pid; "
        "(trap '' TERM; exec sleep 301) & echo $! > stubborn.pid; "
        "(sleep 302 & echo $! > grandchild.pid; wait) & "
        "wait"
    )
    outcome, elapsed, _ = run(tmp_path, command, timeout_s=1)
    assert outcome.timed_out
    pids = {name: read_pid(tmp_path / f"{name}.pid") for name in ("shell", "child", "stubborn", "grandchild")}
    assert not [name for name, pid in pids.items() if alive(pid)]
    assert elapsed >= 1 + GRACE_S  # the stubborn one needed the SIGKILL after the grace


def test_shell_that_ignores_sigterm_is_killed(tmp_path):
    outcome, _, _ = run(tmp_path, "trap '' TERM; echo $$ > shell.pid; sleep 300 & wait", timeout_s=1)
    assert outcome.timed_out
    assert not alive(read_pid(tmp_path / "shell.pid"))


def test_setsid_escapee_is_hunted_by_its_environment_token(tmp_path):
    command = (
        "echo $$ > shell.pid; setsid sleep 303 & echo $! > escaped.pid; "
        "sleep 0.2; ps -o pgid= -p $! > escaped.pgid; sleep 300"
    )
    outcome, _, _ = run(tmp_path, command, timeout_s=1)
    assert outcome.timed_out
    escaped = read_pid(tmp_path / "escaped.pid")
    assert read_pid(tmp_path / "escaped.pgid") != read_pid(tmp_path / "shell.pid")  # it did leave the group
    assert not alive(escaped)


def test_hook_that_exits_on_time_leaves_its_server_running(tmp_path):
    # The reference's pattern: before_all starts a fake API server, after_all stops it.
    outcome, _, _ = run(tmp_path, "sleep 304 & echo $! > server.pid")
    server = read_pid(tmp_path / "server.pid")
    try:
        assert outcome.ok
        assert alive(server)
    finally:
        os.kill(server, signal.SIGKILL)


def test_ctrl_c_while_waiting_kills_the_group_and_propagates(tmp_path):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.7)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path, "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait", timeout_s=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not alive(read_pid(tmp_path / "shell.pid"))
    assert not alive(read_pid(tmp_path / "child.pid"))


def test_missing_cwd_is_an_error_not_an_exception(tmp_path):
    log = tmp_path / "log"
    with open(log, "wb") as handle:
        outcome = run_on_host("true", cwd=tmp_path / "nope", env={}, log=handle, timeout_s=5)
    assert outcome.exit_code is None and not outcome.timed_out
    assert outcome.error.startswith(f"could not start bash in {tmp_path / 'nope'}")


def test_stragglers_are_live_group_members_not_zombies(tmp_path):
    outcome, _, _ = run(tmp_path, "sleep 305 & echo $! > s.pid")
    pid = read_pid(tmp_path / "s.pid")
    pgid = os.getpgid(pid)
    try:
        assert pid in (stragglers(pgid, "no-token") or [])
        assert pid not in (stragglers(os.getpgid(0), "no-token") or [])
    finally:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid not in (stragglers(pgid, "no-token") or [])


def test_executor_collects_outputs_from_every_dir_and_empties_them(tmp_path):
    first, second = tmp_path / "ws", tmp_path / "root"
    first.mkdir()
    second.mkdir()
    (first / ".hook-outputs.yaml").write_text("env: {A: '1', B: '1'}\n")
    (second / ".hook-outputs.json").write_text('{"env": {"B": "2"}}')
    found = HostExecutor(second, {}, (first, second)).take_outputs()
    assert found is not None and found.outputs.env == {"A": "1", "B": "2"}
    assert list(first.iterdir()) == [] and list(second.iterdir()) == []
