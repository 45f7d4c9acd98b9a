"""exec: deadlines (freeze / kill_exec), exit classification, streams, stdin, env, cwd, user."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox.base import EndReason, SandboxError

pytestmark = pytest.mark.docker


def test_sleep_9999_ends_at_the_deadline_and_its_files_can_still_be_copied_out(make_sandbox, tmp_path: Path):
    sandbox = make_sandbox("sleeper")
    result = sandbox.exec(["sh", "-c", "echo partial > /workspace/out.txt; echo started; sleep 9999"], timeout=3)
    assert result.end_reason is EndReason.TIMED_OUT and result.exit_code is None
    assert 3 <= result.duration_s < 3 + 4, result.duration_s
    assert result.stdout == b"started\n"
    assert sandbox.frozen

    report = sandbox.copy_out("/workspace", tmp_path / "out", max_bytes=10**6, max_files=100)
    assert report.files == 1 and (tmp_path / "out" / "out.txt").read_text() == "partial\n"
    with pytest.raises(SandboxError, match="frozen"):
        sandbox.exec(["true"])


def test_kill_exec_ends_only_that_command_and_its_children(make_sandbox):
    sandbox = make_sandbox("hook")
    result = sandbox.exec(["sh", "-c", "sleep 9999 & sleep 9998 & sleep 9997"], timeout=2, on_timeout="kill_exec")
    assert result.end_reason is EndReason.TIMED_OUT and result.exit_code == 137
    assert 2 <= result.duration_s < 2 + 4, result.duration_s
    assert not sandbox.frozen
    processes = sandbox.exec(["ps", "-eo", "args="]).stdout.decode()
    assert "sleep 99" not in processes and "head -c 1" in processes


def test_a_deadline_freezes_commands_running_alongside(make_sandbox):
    sandbox = make_sandbox("side")
    side: dict[str, object] = {}
    thread = threading.Thread(target=lambda: side.setdefault("r", sandbox.exec(["sleep", "9999"])))
    thread.start()
    main = sandbox.exec(["sleep", "9999"], timeout=2)
    thread.join(timeout=10)
    assert main.end_reason is EndReason.TIMED_OUT
    assert side["r"].end_reason is EndReason.TIMED_OUT  # type: ignore[attr-defined]


def test_a_background_child_holding_stdout_does_not_hold_the_exec(make_sandbox):
    sandbox = make_sandbox("bg")
    started = time.monotonic()
    result = sandbox.exec(["sh", "-c", "sleep 30 & echo started"])
    assert result.ok and result.stdout == b"started\n"
    assert result.duration_s < 2
    # The call itself also waits for the daemon, which holds the next exec a few seconds then.
    assert time.monotonic() - started < 2 + 6


@pytest.mark.parametrize(
    ("cmd", "reason", "code", "sig"),
    [
        (["sh", "-c", "exit 3"], EndReason.EXITED, 3, None),
        (["sh", "-c", "kill -TERM $$"], EndReason.SIGNALED, 143, 15),
        (["no-such-binary"], EndReason.EXITED, 126, None),
    ],
)
def test_exit_classification(make_sandbox, cmd, reason, code, sig):
    result = make_sandbox("codes").exec(cmd)
    assert (result.end_reason, result.exit_code, result.signal) == (reason, code, sig)


def test_streams_to_files_with_a_cap(make_sandbox, tmp_path: Path):
    sandbox = make_sandbox("streams")
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        result = sandbox.exec(
            ["sh", "-c", "head -c 3000000 /dev/zero; echo oops >&2"], stdout=out, stderr=err, max_output_bytes=1_000_000
        )
    assert result.ok and result.output_truncated
    assert result.stdout is None and result.stderr is None
    assert out_path.stat().st_size == 1_000_000 and err_path.read_bytes() == b"oops\n"


def test_stdin_env_cwd_and_user(make_sandbox):
    sandbox = make_sandbox("io")
    big = b"x" * 5_000_000
    assert (
        sandbox.exec(["python3", "-c", "import sys; print(len(sys.stdin.buffer.read()))"], stdin=big).stdout
        == b"5000000\n"
    )
    result = sandbox.exec(
        ["sh", "-c", 'echo "$GREETING"; pwd; id -u; echo "$HOME"'],
        env={"GREETING": "héllo"},
        cwd="/tmp",
        user="1000:1000",
    )
    assert result.stdout.decode().splitlines() == ["héllo", "/tmp", "1000", "/home/agent"]
    assert sandbox.exec(["pwd"]).stdout == b"/workspace\n"


def test_destroy_is_idempotent_and_ends_running_commands(make_sandbox, backend, run_id):
    sandbox = make_sandbox("gone")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sandbox.exec(["sleep", "9999"])
        except SandboxError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    sandbox.destroy()
    sandbox.destroy()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert errors and "destroyed" in str(errors[0])
    with pytest.raises(SandboxError, match="destroyed"):
        sandbox.exec(["true"])
