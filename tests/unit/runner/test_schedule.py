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

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner import collect
from agent_eval_sandbox.runner.context import CaseStatus
from agent_eval_sandbox.runner.schedule import run_cases
from agent_eval_sandbox.sandbox.base import SandboxError
from agent_eval_sandbox.sandbox.docker_errors import DockerUnavailableError
from agent_eval_sandbox.sandbox.fake import ExecCall, FakeSandbox, Hang, Reply
from agent_eval_sandbox.sandbox.pool import REMOVERS
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

    # two running, two made ahead for the next cases, and finished ones still being removed (bounded)
    assert peak == 2 and backend.peak_live <= 2 + 2 + (2 + REMOVERS)
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

    # The running case's agent ended, but its copy-out stops at the interrupt: it is not recorded as whole.
    assert outcomes[0].end_reason == "interrupted" and "copy-out stopped" in (outcomes[0].error or "")
    assert [o.error for o in outcomes[1:]] == ["the run was interrupted before this case started"] * 2
    assert [o.end_reason for o in outcomes[1:]] == ["interrupted"] * 2
    assert marks.read_text() == "c1\n"  # not even the later cases' hooks ran
    assert len(cli.calls) == 1 and backend.live == []
    # c2's sandbox may have been made ahead; nothing ever ran or went into it
    assert all(s.did("exec") == [] and s.did("copy_in") == [] for s in backend.created[1:])
    assert len(backend.created) <= 2
    assert [s.state for s in statuses] == ["interrupted"] * 3


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
    assert len(cli.calls) == 1 and backend.live == []
    # c2's sandbox may have been made ahead: nothing ever ran or went into it, and it went with the rest
    assert all(s.did("exec") == [] and s.did("copy_in") == [] for s in backend.created[1:])
    assert len(backend.created) <= 2 and backend.created[0].spec.case_id == "c1"
    assert "c1" in {r.case_id for r in backend.reaped}
    assert all(r.reason == f"teardown of run {RUN_ID}" for r in backend.reaped)
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


# ---- sandboxes made ahead ----------------------------------------------------------------------------


def test_the_next_case_s_sandbox_is_made_while_the_case_before_it_runs(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id)
    made_during: dict[str, list[str]] = {}

    def note_what_exists(call: ExecCall) -> None:
        deadline = time.monotonic() + 5
        wanted = {"c1": "c2", "c2": "c3"}.get(_case_of(call))
        while wanted and wanted not in [s.spec.case_id for s in backend.created]:
            assert time.monotonic() < deadline, f"{wanted}'s sandbox was not made while {_case_of(call)} ran"
            time.sleep(0.005)
        made_during[_case_of(call)] = [s.spec.case_id for s in backend.created]

    cli.before = note_what_exists
    pipeline = make_pipeline(parallelism=1)
    outcomes, _ = _run(pipeline)

    assert [o.end_reason for o in outcomes] == ["exited"] * 3
    assert made_during["c1"][:2] == ["c1", "c2"] and "c3" in made_during["c2"]
    # one sandbox per case, made for it, and each ran one agent only: its own
    assert sorted(s.spec.case_id for s in backend.created) == ["c1", "c2", "c3"]
    assert sorted(_case_of(call) for call in cli.calls) == ["c1", "c2", "c3"]
    assert all(len(s.did("exec")) == 1 for s in backend.created)
    assert backend.live == []
    # each case's staging directory went once its results were in the run directory
    assert [p.name for p in pipeline.ctx.staging.iterdir() if p.name.isdigit()] == []


def test_a_sandbox_made_ahead_holds_nothing_of_its_case_and_mounts_only_its_own_directories(
        eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id, task=f"task of {case_id}")
    pipeline = make_pipeline(parallelism=1)
    at_creation: dict[str, dict[str, object]] = {}

    def look_at_the_mounts(spec) -> None:
        sources = {m.target: m.source for m in spec.mounts}
        run_dir, managed = sources[paths.RUN_DIR], sources[paths.MANAGED_SETTINGS]
        at_creation[spec.case_id] = {"started": pipeline.case_dir(spec.case_id).path.exists(),
                                     "run": sorted(p.name for p in run_dir.iterdir()),
                                     "managed": managed.read_bytes(), "stage": run_dir.parent}

    backend.on_create = look_at_the_mounts
    prompts: dict[str, str] = {}

    def read_prompt(call: ExecCall) -> None:
        prompts[_case_of(call)] = call.read(f"{paths.RUN_DIR}/{paths.PROMPT_FILE_NAME}").decode()
        time.sleep(0.2)  # the next case's sandbox is made meanwhile, before that case starts

    cli.before = read_prompt
    outcomes, _ = _run(pipeline)

    assert [o.end_reason for o in outcomes] == ["exited"] * 3
    ahead = {case_id: seen for case_id, seen in at_creation.items() if not seen["started"]}
    assert set(ahead) >= {"c2", "c3"}, at_creation
    assert all(seen["run"] == [] and seen["managed"] == b"" for seen in ahead.values()), ahead
    assert len({seen["stage"] for seen in at_creation.values()}) == 3  # each case's own directories
    assert all(f"task of {case_id}" in prompts[case_id] for case_id in ("c1", "c2", "c3"))


def test_on_a_backend_that_copies_its_mounts_in_at_creation_nothing_is_made_ahead(eval_project, make_pipeline,
                                                                                  backend, cli):
    # Kubernetes copies a mount's source into the Pod when it is made: a sandbox made ahead of its
    # case would have an empty prompt and managed settings (no hooks). Made when the case asks, then.
    eval_project.eval_yaml()
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id, task=f"task of {case_id}")
    backend.mounts_are_live = False
    pipeline = make_pipeline(parallelism=1)
    at_creation: dict[str, tuple[bool, bytes]] = {}

    def look_at_the_mounts(spec) -> None:
        sources = {m.target: m.source for m in spec.mounts}
        prompt = sources[paths.RUN_DIR] / paths.PROMPT_FILE_NAME
        at_creation[spec.case_id] = (prompt.exists(), sources[paths.MANAGED_SETTINGS].read_bytes())

    backend.on_create = look_at_the_mounts
    cli.before = lambda call: time.sleep(0.1)  # time enough for a pool to make the next one
    outcomes, _ = _run(pipeline)

    assert [o.end_reason for o in outcomes] == ["exited"] * 3
    assert sorted(at_creation) == ["c1", "c2", "c3"]
    assert all(has_prompt and managed != b"" for has_prompt, managed in at_creation.values()), at_creation
    assert backend.live == [] and all(s.destroyed for s in backend.created)


@pytest.mark.parametrize("fails", ["create", "copy-in"])
def test_a_sandbox_made_ahead_that_fails_is_retried_with_a_new_one_never_the_same(eval_project, make_pipeline,
                                                                                  backend, cli, monkeypatch, fails):
    eval_project.eval_yaml()
    for case_id in ("c1", "c2", "c3"):
        eval_project.case(case_id)
    tries: list[str] = []

    def c2_fails_first(spec) -> None:
        tries.append(spec.case_id)
        if fails == "create" and spec.case_id == "c2" and tries.count("c2") == 1:
            raise DockerUnavailableError("cannot reach the Docker daemon while creating sandbox: reset by peer")

    backend.on_create = c2_fails_first
    real_copy_in = FakeSandbox.copy_in
    copied: list[FakeSandbox] = []

    def copy_in_fails_once_for_c2(self, *args, **kwargs):
        copied.append(self)
        if self.spec.case_id == "c2" and [s.spec.case_id for s in copied].count("c2") == 1:
            raise SandboxError("copying into the sandbox failed: 500 Server Error")
        return real_copy_in(self, *args, **kwargs)

    if fails == "copy-in":
        monkeypatch.setattr(FakeSandbox, "copy_in", copy_in_fails_once_for_c2)
    cli.before = lambda call: time.sleep(0.05)  # c2's first sandbox is made ahead meanwhile
    pipeline = make_pipeline(parallelism=1)
    outcomes, _ = _run(pipeline)

    assert [o.end_reason for o in outcomes] == ["exited"] * 3, [o.error for o in outcomes]
    assert tries.count("c2") == 2 and sum("retrying" in w for w in pipeline.warnings) == 1, (tries, pipeline.warnings)
    c2_boxes = [s for s in backend.created if s.spec.case_id == "c2"]
    assert len(c2_boxes) == (1 if fails == "create" else 2)
    # the agent ran once per case, each in a sandbox of its own, c2's in the one made for the retry
    assert sorted(_case_of(call) for call in cli.calls) == ["c1", "c2", "c3"]
    assert len({id(call.sandbox) for call in cli.calls}) == 3
    assert next(call.sandbox for call in cli.calls if _case_of(call) == "c2") is c2_boxes[-1]
    assert all(s.did("exec") == [] for s in c2_boxes[:-1])
    assert backend.live == [] and all(s.destroyed for s in backend.created)


def test_exit_first_makes_nothing_more_ahead_once_a_case_did_not_complete(eval_project, make_pipeline, backend, cli):
    eval_project.eval_yaml()
    ids = [f"c{n}" for n in range(1, 9)]
    for case_id in ids:
        eval_project.case(case_id)
    cli.before = _only_c2(_raise(SandboxError("the daemon lost the container")))
    backend.on_create = lambda spec: time.sleep(0.05)  # making one takes a while, as with Docker
    pipeline = make_pipeline(parallelism=1)
    statuses = [CaseStatus(inv.id) for inv in pipeline.invocations]
    outcomes = run_cases(pipeline.ctx, pipeline.invocations, statuses, exit_first=True).outcomes

    assert [o.end_reason for o in outcomes[:2]] == ["exited", "error"]
    assert all(o.end_reason == "interrupted" and not o.ran for o in outcomes[2:])
    # c1's and c2's, and at most what was made ahead before c2 ended: not one per skipped case
    made = [s.spec.case_id for s in backend.created]
    assert made[:2] == ["c1", "c2"] and len(made) <= 3, made
    assert all(s.did("exec") == [] for s in backend.created[2:])
    assert backend.live == [] and all(s.destroyed for s in backend.created)
