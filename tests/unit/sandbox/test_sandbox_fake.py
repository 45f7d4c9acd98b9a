"""The fake backend keeps the `Sandbox` contract the pipeline relies on (sandbox/fake.py)."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import RuntimeNotRegisteredError, UnsafeArchiveError
from agent_eval_sandbox.runner.events import stream_objects
from agent_eval_sandbox.sandbox.base import BindMount, EndReason, SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.fake import (
    KILLED_EXIT_CODE,
    ExecCall,
    FakeBackend,
    FakeHangLimitError,
    Hang,
    Reply,
    stream_json,
)


def _spec(run_id: str = "run", case_id: str = "case", deadline: float | None = None, **extra) -> SandboxSpec:
    return SandboxSpec(image="fake", run_id=run_id, case_id=case_id,
                       deadline_epoch=time.time() + 3600 if deadline is None else deadline, **extra)


@pytest.fixture
def backend():
    with FakeBackend() as fake:
        yield fake


def test_files_go_in_and_come_out_through_the_safe_archive(backend, tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.txt").write_text("a")
    (src / "secret.txt").write_text("kept out")
    (src / "inside-link").symlink_to("pkg/a.txt")
    (src / "outside-link").symlink_to("/etc/passwd")
    sandbox = backend.create(_spec())
    report = sandbox.copy_in(src, "/workspace", exclude=lambda rel: rel == "secret.txt")
    assert report.files == 1 and {(s.path, s.kind) for s in report.skipped} == {
        ("secret.txt", "excluded"), ("outside-link", "symlink")}
    assert (sandbox.root / "workspace" / "pkg" / "a.txt").read_text() == "a"
    assert os.readlink(sandbox.root / "workspace" / "inside-link") == "pkg/a.txt"  # as the daemon makes it
    sandbox.copy_in_files({"b/c.txt": b"c"}, "/workspace")
    (sandbox.root / "workspace" / ".git").mkdir()
    (sandbox.root / "workspace" / ".git" / "config").write_text("[core]\n\tfsmonitor = evil\n")

    out = tmp_path / "out"
    copied = sandbox.copy_out("/workspace", out, max_bytes=1 << 20, max_files=100)
    assert copied.found and copied.files == 2
    assert (out / "pkg" / "a.txt").read_text() == "a" and (out / "b" / "c.txt").read_text() == "c"
    assert not (out / ".git").exists() and not (out / "inside-link").exists()  # no git, no link, ever
    assert {s.kind for s in copied.skipped} == {"git", "symlink"}
    single = sandbox.copy_out("/workspace/b/c.txt", tmp_path / "one", max_bytes=10, max_files=1)
    assert single.files == 1 and (tmp_path / "one" / "c.txt").read_text() == "c"
    assert sandbox.copy_out("/workspace/missing", tmp_path / "none", max_bytes=10, max_files=1).found is False
    with pytest.raises(UnsafeArchiveError, match="more than 1 entries"):
        sandbox.copy_out("/workspace", tmp_path / "capped", max_bytes=1 << 20, max_files=1)


def test_paths_map_into_the_root_and_bind_mounts_to_their_sources(backend, tmp_path):
    (tmp_path / "ro").mkdir()
    sandbox = backend.create(_spec(mounts=(BindMount(tmp_path / "ro", "/run/x"),)))
    assert sandbox.host_path("/workspace/../../etc/passwd") == sandbox.root / "etc" / "passwd"
    assert sandbox.host_path("/run/x/sock") == tmp_path / "ro" / "sock"
    assert sandbox.host_path("/home/agent") == sandbox.root / "home" / "agent"
    with pytest.raises(SandboxError, match="read-only"):
        sandbox.copy_in_files({"f": b""}, "/run/x")


def test_a_command_is_the_behaviours_reply(tmp_path):
    calls: list[ExecCall] = []

    def behave(call: ExecCall) -> Reply:
        calls.append(call)
        call.write("made.txt", "by the command")
        if call.cmd[0] == "oom":
            return Reply(exit_code=137, oom_kills=1)
        if call.cmd[0] == "interrupted":
            return Reply(exit_code=130)
        return Reply(stdout=b"x" * 10, stderr=b"warn", exit_code=3)

    with FakeBackend(behave) as backend:
        sandbox = backend.create(_spec(env={"FROM_SPEC": "1"}))
        log = io.BytesIO()
        result = sandbox.exec(["run"], env={"A": "b"}, stdout=log, max_output_bytes=4)
        assert result.exit_code == 3 and result.end_reason is EndReason.EXITED and not result.ok
        assert log.getvalue() == b"xxxx" and result.stdout is None and result.stderr == b"warn"
        assert result.output_truncated
        assert calls[0].env["A"] == "b" and calls[0].env["FROM_SPEC"] == "1" and calls[0].env["HOME"] == "/home/agent"
        assert calls[0].cwd == "/workspace" and (sandbox.root / "workspace" / "made.txt").is_file()
        assert sandbox.exec(["oom"]).end_reason is EndReason.OOM_KILLED
        interrupted = sandbox.exec(["interrupted"])
        assert interrupted.end_reason is EndReason.SIGNALED and interrupted.signal == 2


def test_a_hang_at_its_deadline_freezes_the_sandbox_which_still_gives_its_files(tmp_path):
    with FakeBackend(lambda call: Hang(stdout=b"partial")) as backend:
        sandbox = backend.create(_spec())
        started = time.monotonic()
        result = sandbox.exec(["agent"], timeout=0.2)
        assert 0.2 <= time.monotonic() - started < 5
        assert result.end_reason is EndReason.TIMED_OUT and result.exit_code is None and result.stdout == b"partial"
        assert sandbox.frozen
        with pytest.raises(SandboxError, match="frozen"):
            sandbox.exec(["more"])
        (sandbox.root / "workspace" / "left.txt").write_text("x")
        assert sandbox.copy_out("/workspace", tmp_path / "out", max_bytes=100, max_files=10).files == 1
        assert sandbox.thaw() and not sandbox.frozen
        backend.behaviour = lambda call: Reply()
        assert sandbox.exec(["cleanup"]).ok
        assert [a.kind for a in sandbox.actions] == ["create", "exec", "freeze", "copy_out", "thaw", "exec"]
        assert sandbox.did("copy_out")[0].frozen


def test_kill_exec_ends_only_the_command(backend):
    backend.behaviour = lambda call: Hang()
    sandbox = backend.create(_spec())
    result = sandbox.exec(["hook"], timeout=0.1, on_timeout="kill_exec")
    assert result.end_reason is EndReason.TIMED_OUT and result.exit_code == KILLED_EXIT_CODE
    assert not sandbox.frozen
    backend.behaviour = lambda call: Reply()
    assert sandbox.exec(["next"]).ok


def test_destroy_ends_a_hanging_command_and_removes_everything(backend, tmp_path):
    backend.behaviour = lambda call: Hang()
    sandbox = backend.create(_spec())
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sandbox.exec(["agent"])
        except SandboxError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.1)
    sandbox.destroy()
    thread.join(5)
    assert not thread.is_alive() and "destroyed while a command ran" in str(errors[0])
    assert not sandbox.root.exists() and backend.live == []
    sandbox.destroy()  # idempotent
    with pytest.raises(SandboxError, match="destroyed"):
        sandbox.copy_out("/workspace", tmp_path / "out", max_bytes=10, max_files=10)


def test_a_hang_nothing_ends_fails_the_test_instead_of_blocking_it():
    with FakeBackend(lambda call: Hang(), hang_limit_s=0.1) as backend:
        sandbox = backend.create(_spec())
        with pytest.raises(FakeHangLimitError, match="deadline: none"):
            sandbox.exec(["agent"])
        with pytest.raises(FakeHangLimitError, match="deadline: 30s"):
            sandbox.exec(["agent"], timeout=30)


def test_a_broken_sandbox_raises_from_the_behaviour_and_after_it_vanished(backend, tmp_path):
    def broken(call: ExecCall) -> Reply:
        raise SandboxError("daemon gone")

    backend.behaviour = broken
    sandbox = backend.create(_spec())
    with pytest.raises(SandboxError, match="daemon gone"):
        sandbox.exec(["x"])
    sandbox.vanish()
    with pytest.raises(SandboxError, match="vanished"):
        sandbox.copy_out("/workspace", tmp_path, max_bytes=10, max_files=10)
    assert backend.live == [sandbox]
    sandbox.destroy()
    assert backend.live == []


def test_the_backend_removes_what_it_is_asked_to_and_nothing_else(tmp_path):
    backend = FakeBackend(runtimes=["runsc-nonet"])
    ours = [backend.create(_spec("r1", f"c{i}")) for i in range(2)]
    other = backend.create(_spec("r2", "c"))
    stale = backend.create(_spec("r0", "c", deadline=time.time() - backend.grace_s - 1))
    assert backend.peak_live == 4
    assert [r.case_id for r in backend.destroy_run("r1")] == ["c0", "c1"] and all(s.destroyed for s in ours)
    assert [r.name for r in backend.reap_orphans()] == [stale.name] and backend.gc() == []
    assert backend.live == [other]
    backend.check_runtime("runsc-nonet")
    with pytest.raises(RuntimeNotRegisteredError):
        backend.check_runtime("runsc")
    backend.close()
    assert other.destroyed and not backend.base_dir.exists()


def test_on_create_can_refuse_a_sandbox(backend):
    def refuse(spec: SandboxSpec) -> None:
        raise SandboxError(f"no room for {spec.case_id}")

    backend.on_create = refuse
    with pytest.raises(SandboxError, match="no room for case"):
        backend.create(_spec())
    assert backend.created == [] and os.listdir(backend.base_dir) == []


def test_stream_json_is_what_the_stream_reader_reads():
    objects = [{"type": "system", "subtype": "init"}, {"type": "result", "result": "é\nnext"}]
    data = stream_json(objects)
    assert data.count(b"\n") == 2 and b" " not in data.split(b"\n")[0]
    assert [obj for _, obj in stream_objects(data.decode().splitlines(keepends=True))] == objects


def test_files_written_by_a_behaviour_are_relative_to_its_cwd(backend):
    backend.behaviour = lambda call: (call.write("sub/x.txt", b"1"), Reply())[1]
    sandbox = backend.create(_spec())
    sandbox.copy_in_files({"sub/.keep": b""}, "/workspace")
    sandbox.exec(["x"], cwd="/workspace/sub")
    assert (sandbox.root / "workspace" / "sub" / "sub" / "x.txt").read_bytes() == b"1"
    assert Path(sandbox.host_path("/workspace/sub")).is_dir()
