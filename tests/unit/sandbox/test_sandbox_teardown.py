"""run_scope removes the run's objects on signals and on exit (no Docker: a recording backend)."""

from __future__ import annotations

import os
import signal

import pytest

from agent_eval_sandbox.sandbox.base import RemovedObject, SandboxBackend
from agent_eval_sandbox.sandbox.teardown import run_scope


class Recorder(SandboxBackend):
    name = "recorder"

    def __init__(self, fail: bool = False, left: list[RemovedObject] | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.left = left or []

    def destroy_run(self, run_id: str) -> list[RemovedObject]:
        self.calls.append(run_id)
        if self.fail:
            raise RuntimeError("daemon gone")
        left, self.left = self.left, []
        return left

    def create(self, spec):  # pragma: no cover - not used here
        raise NotImplementedError

    def reap_orphans(self):  # pragma: no cover
        raise NotImplementedError

    def gc(self, *, all=False):  # pragma: no cover
        raise NotImplementedError

    def check_runtime(self, name):  # pragma: no cover
        raise NotImplementedError


def test_sigint_removes_first_then_raises_keyboard_interrupt_and_restores_handlers():
    backend = Recorder()
    before = signal.getsignal(signal.SIGINT)
    seen_in_handler: list[list[str]] = []
    with pytest.raises(KeyboardInterrupt), run_scope(backend, "run-1"):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)  # let the handler run
        except KeyboardInterrupt:
            seen_in_handler.append(list(backend.calls))
            raise
    assert seen_in_handler == [["run-1"]]  # removed before the exception unwound anything
    assert signal.getsignal(signal.SIGINT) is before


def test_sigterm_exits_143():
    backend = Recorder()
    with pytest.raises(SystemExit) as exit_info, run_scope(backend, "run-2"):
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)
    assert exit_info.value.code == 143
    assert backend.calls[0] == "run-2"


def test_normal_exit_and_errors_also_remove():
    backend = Recorder()
    with run_scope(backend, "ok"):
        pass
    with pytest.raises(ValueError), run_scope(backend, "boom"):
        raise ValueError
    assert backend.calls == ["ok", "boom"]


def test_a_failing_removal_does_not_hide_the_signal():
    backend = Recorder(fail=True)
    with pytest.raises(KeyboardInterrupt), run_scope(backend, "r"):
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)


def _left(kind: str, name: str) -> RemovedObject:
    return RemovedObject(kind=kind, name=name, run_id="r", case_id="001", reason="run ended")


def test_what_was_left_is_said_by_kind_and_a_clean_end_says_nothing(caplog):
    caplog.set_level("INFO", logger="agent_eval_sandbox.sandbox.teardown")
    with run_scope(Recorder(), "clean"):
        pass
    assert caplog.messages == []
    left = [_left("container", "c1"), _left("volume", "v1"), _left("container", "c2"), _left("volume", "v2")]
    with run_scope(Recorder(left=left), "dirty"):
        pass
    assert caplog.messages == ["removed what was left of run dirty: 2 containers, 2 volumes"]
