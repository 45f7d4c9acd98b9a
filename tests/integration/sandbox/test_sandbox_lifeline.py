"""The lifeline: a sandbox runs exactly as long as its controller holds the stdin of its main process.

Letting go (what `destroy` does after the removal) and dying (tests/integration/sandbox/
test_sandbox_teardown.py, kill -9) both end it; nothing the sandbox's user does inside
ends it early or keeps it going.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import tempfile
import time
from collections.abc import Iterator

import pytest

from agent_eval_sandbox.sandbox.base import BindMount, Hardening, SandboxError, SandboxSpec
from tests.docker_objects import objects_of_run

pytestmark = pytest.mark.docker

RUNTIMES = ["runc", "crun", "runsc-nonet"]  # gVisor as scripts/install-gvisor.sh registers it

# Run as the sandbox's user: every way it has at the lifeline's process and at pid 1.
AT_THE_LIFELINE = r"""
import json, os, signal
def program(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode()
    except OSError:
        return ""
heads = [int(p) for p in os.listdir("/proc") if p.isdigit() and program(p) == "head"]
tried = {}
for pid in [*heads, 1]:
    for what, attempt in (
        ("write its stdin", lambda: open(f"/proc/{pid}/fd/0", "wb").write(b"x")),
        ("read its stdin", lambda: open(f"/proc/{pid}/fd/0", "rb").read(1)),
        ("stop it", lambda: os.kill(pid, signal.SIGSTOP)),
        ("kill it", lambda: os.kill(pid, signal.SIGKILL)),
    ):
        try:
            attempt()
            tried[f"{what} ({pid})"] = "done"
        except OSError as exc:
            tried[f"{what} ({pid})"] = exc.strerror
print(json.dumps({"heads": heads, "tried": tried}))
"""


def _running(backend, sandbox) -> bool:
    return bool(backend.client.api.inspect_container(sandbox.container_id)["State"]["Running"])


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_sandbox_stops_as_soon_as_its_lifeline_is_let_go(backend, make_sandbox, runtime):
    sandbox = make_sandbox(f"let-go-{runtime}", hardening=Hardening(runtime=runtime))
    assert sandbox.exec(["true"]).ok and _running(backend, sandbox)
    sandbox._lifeline.close()  # what destroy() does once the container is removed
    let_go = time.monotonic()
    while _running(backend, sandbox) and time.monotonic() - let_go < 10:
        time.sleep(0.05)
    assert not _running(backend, sandbox), f"the sandbox outlived its lifeline under {runtime}"
    state = backend.client.api.inspect_container(sandbox.container_id)["State"]
    assert state["ExitCode"] == 0, state  # `head` read the end of its input: nothing wrote to it
    assert time.monotonic() - let_go < 5
    sandbox._lifeline.close()  # idempotent


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_sandbox_user_can_neither_feed_nor_stop_nor_kill_the_lifeline(backend, make_sandbox, runtime):
    sandbox = make_sandbox(f"at-the-lifeline-{runtime}", hardening=Hardening(runtime=runtime))
    result = sandbox.exec(["python3", "-c", AT_THE_LIFELINE])
    assert result.ok, result
    seen = json.loads(result.stdout)
    assert len(seen["heads"]) == 1, seen  # the search finds it: it is there to attack
    assert len(seen["tried"]) == 8 and "done" not in seen["tried"].values(), seen
    time.sleep(0.5)
    assert _running(backend, sandbox) and sandbox.exec(["true"]).ok  # still alive, still held


def _sockets_open() -> int:
    return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("socket:") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}"))


def test_a_sandbox_that_fails_to_start_leaves_no_lifeline_no_directory_and_no_container(
        backend, sandbox_image, run_id, tmp_path, monkeypatch):
    """The lifeline is attached before the start; a start that fails lets go of it, of the sandbox's host
    directory and of its container (a file bind-mounted over a directory: the runtime refuses it)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    spec = SandboxSpec(sandbox_image, run_id, "unstartable", deadline_epoch=time.time() + 600,
                       mounts=(BindMount(a_file, "/opt/agent-eval"),))
    backend.create(SandboxSpec(sandbox_image, run_id, "warm-up", deadline_epoch=time.time() + 600)).destroy()
    with _no_garbage_collection():  # which would free a descriptor left open in the end
        before = _sockets_open()
        for _ in range(3):
            with pytest.raises(SandboxError, match="creating sandbox .* failed"):
                backend.create(spec)
        assert _sockets_open() <= before  # no attach stream held for a sandbox that is not there
    assert objects_of_run(run_id) == []
    assert list((tmp_path / "t").iterdir()) == []  # no aes-etc-* directory, no lock


def test_a_destroyed_sandbox_frees_the_descriptors_of_its_streams(backend, sandbox_image, run_id):
    """Its lifeline, its launcher's stream on standby and each command's: all freed at once, not by the
    garbage collector (each stream and its SDK response refer to each other)."""
    from agent_eval_sandbox.runner.agent_command import launcher_command

    def life(case_id: str) -> None:
        sandbox = backend.create(SandboxSpec(sandbox_image, run_id, case_id, deadline_epoch=time.time() + 600,
                                             standby=launcher_command()))
        assert sandbox.exec(["true"]).ok and sandbox.exec(["sh", "-c", "echo x"], stdin=b"y").ok
        sandbox.destroy()

    life("warm-up")
    with _no_garbage_collection():
        before = _sockets_open()
        for i in range(3):
            life(f"life-{i}")
        assert _sockets_open() <= before


@contextlib.contextmanager
def _no_garbage_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
