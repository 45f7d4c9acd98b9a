"""Scheduling a run's cases (runner/schedule.py) on the fake sandbox backend: the parallelism bound,
the order of outcomes, cancellation, and one case's failure staying its own."""

from __future__ import annotations

import errno
import json
import signal
import threading
import time
from collections.abc import Callable

import pytest

from agent_eval_sandbox.runner import collect
from agent_eval_sandbox.runner.context import CaseStatus
from agent_eval_sandbox.runner.schedule import run_cases
from agent_eval_sandbox.sandbox.base import SandboxError
from agent_eval_sandbox.sandbox.fake import ExecCall, Hang, Reply
from agent_eval_sandbox.sandbox.teardown import run_scope
from tests.unit.runner.fake_cli import is_agent
from tests.unit.runner.pipeline_fixture import RUN_ID, Pipeline


def _run(pipeline: Pipeline):
    statuses = [CaseStatus(inv.id) for inv in pipeline.invocations]
    scheduled = run_cases(pipeline.ctx, pipeline.invocations, statuses)
    assert scheduled.interrupted_by is None
    return scheduled.outcomes, statuses


def _case_of(call: ExecCall) -> str:
    return call.sandbox.spec.case_id


def test_no_more_cases_run_at_once_than_the_parallelism(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    for index in range(5):
        eval_project.case(f"c{index}")
    lock = threading.Lock()
    running, peak = 0, 0
    two_at_once = threading.Event()

    def hold(call: ExecCall) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
            if running == 2:
                two_at_once.set()
        two_at_once.wait(2)  # a run that never has two at once fails below, not here
        time.sleep(0.2)
        with lock:
            running -= 1

    cli.before = hold
    outcomes, statuses = _run(make_pipeline(parallelism=2))

    assert peak == 2 and backend.peak_live == 2
    assert [o.end_reason for o in outcomes] == ["exited"] * 5
    assert all(status.finished is not None for status in statuses)
    assert backend.live == []


def test_outcomes_come_in_the_order_of_the_cases_whatever_order_they_end_in(eval_project, make_pipeline, backend,
                                                                            cli):
    eval_project.eval_yaml()
    for case_id in ("a", "b", "c"):
        eval_project.case(case_id)
    pipeline = make_pipeline(parallelism=3)
    statuses = [CaseStatus(inv.id) for inv in pipeline.invocations]

    def a_waits_for_the_others_to_end(call: ExecCall) -> None:
        deadline = time.monotonic() + 5
        while _case_of(call) == "a" and not all(s.finished for s in statuses[1:]):
            assert time.monotonic() < deadline, "b and c never ended"
            time.sleep(0.01)

    cli.before = a_waits_for_the_others_to_end
    outcomes = run_cases(pipeline.ctx, pipeline.invocations, statuses).outcomes

    assert statuses[0].finished > max(statuses[1].finished, statuses[2].finished)
    assert [o.case_id for o in outcomes] == ["a", "b", "c"]
    assert [o.result for o in outcomes] == ["a done", "b done", "c done"]


def test_once_the_run_is_cancelled_no_further_case_starts(eval_project, make_pipeline, backend, cli, tmp_path):
    marks = tmp_path / "before-each.txt"
    eval_project.eval_yaml(f"""
        hooks:
          before_each:
            - command: 'echo "$CASE_ID" >> {marks}'
    """)
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id)
    pipeline = make_pipeline(parallelism=1)
    cli.before = lambda call: pipeline.ctx.cancelled.set()
    outcomes, statuses = _run(pipeline)

    assert outcomes[0].end_reason == "exited"  # the running case ends as it would have
    assert [o.error for o in outcomes[1:]] == ["the run was interrupted before this case started"] * 2
    assert [o.end_reason for o in outcomes[1:]] == ["interrupted"] * 2
    assert marks.read_text() == "c1\n"  # not even the later cases' hooks ran
    assert len(cli.calls) == 1 and len(backend.created) == 1 and backend.live == []
    assert [s.state for s in statuses] == ["done", "interrupted", "interrupted"]


def test_ctrl_c_removes_the_running_sandbox_and_the_queued_cases_never_start(eval_project, make_pipeline, backend,
                                                                             cli):
    eval_project.eval_yaml()
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id)

    def interrupt_then_hang(call: ExecCall) -> Reply | Hang:
        if not is_agent(call):
            return Reply()
        cli.calls.append(call)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return Hang()  # only the removal of its sandbox can end it

    backend.behaviour = interrupt_then_hang
    pipeline = make_pipeline(parallelism=1)
    previous = signal.getsignal(signal.SIGINT)
    statuses = [CaseStatus(inv.id) for inv in pipeline.invocations]
    with run_scope(backend, RUN_ID, pipeline.ctx.cancelled):
        scheduled = run_cases(pipeline.ctx, pipeline.invocations, statuses)

    assert isinstance(scheduled.interrupted_by, KeyboardInterrupt) and scheduled.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is previous
    assert pipeline.ctx.cancelled.is_set()
    assert len(cli.calls) == 1 and len(backend.created) == 1 and backend.live == []
    assert backend.reaped[0].case_id == "c1" and backend.reaped[0].reason == f"teardown of run {RUN_ID}"
    # every planned case has an outcome: the running one ended by the interrupt, the queued ones never began
    outcomes = scheduled.outcomes
    assert [o.case_id for o in outcomes] == ["c1", "c2", "c3"]
    assert [o.end_reason for o in outcomes] == ["interrupted"] * 3
    assert "destroyed while a command ran" in outcomes[0].error
    assert [o.error for o in outcomes[1:]] == ["the run was interrupted before this case started"] * 2
    assert not any(o.ran for o in outcomes[1:])
    c1 = json.loads(pipeline.case_dir("c1").result.read_text())
    assert c1["end_reason"] == "interrupted"
    for case_id in ("c2", "c3"):  # recorded, not run: no staging, no sandbox, no logs
        assert json.loads(pipeline.case_dir(case_id).result.read_text())["end_reason"] == "interrupted"
        assert not pipeline.case_dir(case_id).stdout_log.exists()
    assert [s.state for s in statuses][1:] == ["interrupted", "interrupted"]


# ---- one case's failure is its own -----------------------------------------------------------------


def _only_c2(action: Callable[[ExecCall], None]) -> Callable[[ExecCall], None]:
    def before(call: ExecCall) -> None:
        if _case_of(call) == "c2":
            action(call)

    return before


def _raise(exc: Exception) -> Callable[[ExecCall], None]:
    def action(call: ExecCall) -> None:
        raise exc

    return action


def _agent_breaks(project, backend, cli, monkeypatch) -> None:
    cli.before = _only_c2(_raise(SandboxError("the daemon lost the container")))


def _agent_double_crashes(project, backend, cli, monkeypatch) -> None:
    cli.before = _only_c2(_raise(RuntimeError("a bug where nobody expected one")))


def _sandbox_not_created(project, backend, cli, monkeypatch) -> None:
    def create(spec) -> None:
        if spec.case_id == "c2":
            raise SandboxError("cannot create volumes: no space left on device")

    backend.on_create = create


def _copy_out_fails(project, backend, cli, monkeypatch) -> None:
    def vanish_after_the_agent(call: ExecCall):
        reply = cli(call)
        if is_agent(call) and _case_of(call) == "c2":
            call.sandbox.vanish()
        return reply

    backend.behaviour = vanish_after_the_agent


def _before_each_fails(project, backend, cli, monkeypatch) -> None:
    project.eval_yaml("""
        hooks:
          before_each:
            - command: 'test "$CASE_ID" != c2'
    """)


def _prepare_fails(project, backend, cli, monkeypatch) -> None:
    (project.root / "cases" / "c2" / "model_script.yaml").write_text("- {tool: 7}\n")


def _collection_fails(project, backend, cli, monkeypatch) -> None:
    real = collect.collect_changes

    def disk_full_for_c2(before, after, case_dir, *args, **kwargs):
        if case_dir.name == "c2":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(before, after, case_dir, *args, **kwargs)

    monkeypatch.setattr(collect, "collect_changes", disk_full_for_c2)


@pytest.mark.parametrize(("breaks", "end_reason", "error"), [
    pytest.param(_agent_breaks, "error", "the daemon lost the container", id="sandbox-breaks-under-the-agent"),
    pytest.param(_agent_double_crashes, "error", "running the case failed: RuntimeError: a bug where nobody",
                 id="unexpected-exception"),
    pytest.param(_sandbox_not_created, "infra_error", "no space left on device", id="sandbox-not-created"),
    pytest.param(_copy_out_fails, "error", "vanished", id="copy-out-fails"),
    pytest.param(_before_each_fails, "hook_failed", "before_each", id="before-each-fails"),
    pytest.param(_prepare_fails, "error", "preparing the case failed: ConfigError", id="prepare-fails"),
    pytest.param(_collection_fails, "error", "collecting the case's results failed: OSError",
                 id="collection-fails"),
])
def test_a_case_that_fails_leaves_no_sandbox_and_the_next_case_runs(eval_project, make_pipeline, backend, cli,
                                                                    monkeypatch, breaks, end_reason, error):
    eval_project.eval_yaml()
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id)
    breaks(eval_project, backend, cli, monkeypatch)
    outcomes, statuses = _run(make_pipeline(parallelism=1))

    assert [o.case_id for o in outcomes] == ["c1", "c2", "c3"]
    for ok in (outcomes[0], outcomes[2]):
        assert ok.end_reason == "exited" and ok.exit_code == 0 and ok.result == f"{ok.case_id} done", ok.error
    assert outcomes[1].end_reason == end_reason and error in outcomes[1].error
    assert statuses[1].finished is not None and statuses[2].finished is not None
    assert backend.live == [] and all(sandbox.destroyed for sandbox in backend.created)
    assert {"c1", "c3"} <= {_case_of(call) for call in cli.calls}
