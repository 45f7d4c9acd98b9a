"""The sandbox pool (sandbox/pool.py) on the fake backend: made ahead, bounded, handed out once,
removed behind, nothing left after close."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from agent_eval_sandbox.sandbox.base import SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.fake import FakeBackend, FakeSandbox
from agent_eval_sandbox.sandbox.pool import DirectSandboxes, SandboxPool


def _spec(key: str) -> Callable[[], SandboxSpec]:
    return lambda: SandboxSpec(image="fake", run_id="run", case_id=key, deadline_epoch=time.time() + 3600)


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def _case_ids(sandboxes: list[FakeSandbox]) -> list[str]:
    return [s.spec.case_id for s in sandboxes]


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend() as fake:
        yield fake


@pytest.fixture
def make_pool(backend: FakeBackend) -> Iterator[Callable[..., SandboxPool]]:
    pools: list[SandboxPool] = []

    def make(ahead: int = 2, **options) -> SandboxPool:
        pool = SandboxPool(backend, ahead=ahead, **options)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close()


def _plan(pool: SandboxPool, *keys: str) -> None:
    for key in keys:
        pool.plan(key, _spec(key))


def test_the_next_sandboxes_are_made_before_their_cases_ask_at_most_ahead_of_them(backend, make_pool):
    pool = make_pool(ahead=2)
    _plan(pool, "c1", "c2", "c3", "c4")
    _wait_for(lambda: len(backend.created) == 2, "two sandboxes made ahead")
    time.sleep(0.05)  # a pool that made more would have by now
    # Made side by side: in either order.
    assert sorted(_case_ids(backend.created)) == ["c1", "c2"] and pool.waiting == 2
    made_for_c1 = next(s for s in backend.created if s.spec.case_id == "c1")

    first = pool.take("c1", _spec("c1"))
    assert first is made_for_c1  # made before the case asked, for that case
    _wait_for(lambda: len(backend.created) == 3, "the next one made once c1 took its own")
    assert sorted(_case_ids(backend.created)) == ["c1", "c2", "c3"] and pool.waiting == 2


def test_a_sandbox_is_handed_out_once_a_second_take_of_its_key_gets_a_new_one(backend, make_pool):
    pool = make_pool(ahead=1)
    _plan(pool, "c1", "c2")
    first = pool.take("c1", _spec("c1"))
    pool.release("c1", first)
    again = pool.take("c1", _spec("c1"))  # e.g. a retry of the case
    assert again is not first and again.spec.case_id == "c1"
    second = pool.take("c2", _spec("c2"))
    assert len({id(first), id(again), id(second)}) == 3
    _wait_for(lambda: first.destroyed, "the released sandbox removed")
    assert first.did("exec") == []  # nothing ever ran in it after its case gave it back


def test_a_key_taken_before_its_sandbox_was_planned_to_be_made_gets_one_made_then(backend, make_pool):
    pool = make_pool(ahead=1)
    _plan(pool, "c1", "c2", "c3")
    third = pool.take("c3", _spec("c3"))  # the scheduler need not take them in order
    assert third.spec.case_id == "c3"
    pool.release("c3", third)
    # c3 is settled: the pool never makes another for it
    pool.release("c1", pool.take("c1", _spec("c1")))
    pool.release("c2", pool.take("c2", _spec("c2")))
    pool.close()
    assert sorted(_case_ids(backend.created)) == ["c1", "c2", "c3"]


def test_a_case_that_never_takes_its_sandbox_has_it_removed_and_the_next_one_made(backend, make_pool):
    pool = make_pool(ahead=1)
    _plan(pool, "c1", "c2")
    _wait_for(lambda: len(backend.created) == 1, "c1's sandbox made")
    unused = backend.created[0]
    pool.release("c1", None)  # e.g. its staging failed
    _wait_for(lambda: unused.destroyed, "the unused sandbox removed")
    _wait_for(lambda: _case_ids(backend.created) == ["c1", "c2"], "c2's sandbox made")
    assert unused.did("exec") == [] and unused.did("copy_in") == []


def test_giving_a_sandbox_back_returns_at_once_and_close_waits_for_the_removal(backend, make_pool):
    pool = make_pool(ahead=1)
    _plan(pool, "c1")
    sandbox = pool.take("c1", _spec("c1"))
    removing, finish = threading.Event(), threading.Event()
    destroy = sandbox.destroy

    def slow_destroy() -> None:
        removing.set()
        finish.wait(5)
        destroy()

    sandbox.destroy = slow_destroy  # type: ignore[method-assign]
    pool.release("c1", sandbox)
    assert removing.wait(5) and not sandbox.destroyed  # the case went on while it is being removed
    closed = threading.Thread(target=pool.close)
    closed.start()
    closed.join(0.2)
    assert closed.is_alive()  # close() waits for the removal
    finish.set()
    closed.join(5)
    assert not closed.is_alive() and sandbox.destroyed and backend.live == []


def test_close_removes_what_was_made_and_never_taken_and_waits_for_a_creation_in_flight(backend, make_pool):
    entered, finish = threading.Event(), threading.Event()

    def slow_create(spec: SandboxSpec) -> None:
        if spec.case_id == "c2":
            entered.set()
            finish.wait(5)

    backend.on_create = slow_create
    pool = make_pool(ahead=2)
    _plan(pool, "c1", "c2", "c3")
    assert entered.wait(5)
    closed = threading.Thread(target=pool.close)
    closed.start()
    closed.join(0.2)
    assert closed.is_alive()  # its container may appear after a teardown's sweep: close waits for it
    finish.set()
    closed.join(5)
    assert not closed.is_alive()
    assert sorted(_case_ids(backend.created)) == ["c1", "c2"]  # c3 was never made
    assert backend.live == [] and all(s.did("exec") == [] for s in backend.created)


def test_once_the_run_is_stopped_nothing_more_is_made(backend, make_pool):
    stop = threading.Event()
    pool = make_pool(ahead=1, stop=stop)
    _plan(pool, "c1", "c2", "c3")
    _wait_for(lambda: len(backend.created) == 1, "c1's sandbox made")
    stop.set()
    pool.release("c1", pool.take("c1", _spec("c1")))
    pool.release("c2", None)
    time.sleep(0.05)
    assert _case_ids(backend.created) == ["c1"]
    pool.close()
    assert backend.live == []


def test_a_failed_creation_is_the_case_s_error_and_the_pool_goes_on(backend, make_pool):
    def fail_c1(spec: SandboxSpec) -> None:
        if spec.case_id == "c1":
            raise SandboxError("the daemon said no")

    backend.on_create = fail_c1
    pool = make_pool(ahead=1)
    _plan(pool, "c1", "c2")
    with pytest.raises(SandboxError, match="the daemon said no"):
        pool.take("c1", _spec("c1"))
    pool.release("c1", None)
    assert pool.take("c2", _spec("c2")).spec.case_id == "c2"


def test_no_case_gets_a_sandbox_once_the_pool_is_closed(make_pool):
    pool = make_pool(ahead=1)
    _plan(pool, "c1")
    pool.close()
    with pytest.raises(SandboxError, match="no new case starts"):
        pool.take("c1", _spec("c1"))
    pool.close()  # idempotent


def test_a_spec_is_made_only_when_its_sandbox_is(backend, make_pool):
    asked: list[str] = []

    def spec_of(key: str) -> Callable[[], SandboxSpec]:
        def make() -> SandboxSpec:
            asked.append(key)
            return _spec(key)()
        return make

    pool = make_pool(ahead=1)
    for key in ("c1", "c2", "c3"):
        pool.plan(key, spec_of(key))
    _wait_for(lambda: len(backend.created) == 1, "c1's sandbox made")
    assert asked == ["c1"]  # the later cases' host directories are not made yet


def test_planning_a_key_twice_is_a_bug(make_pool):
    pool = make_pool(ahead=0)
    _plan(pool, "c1")
    with pytest.raises(ValueError, match="already planned"):
        _plan(pool, "c1")


def test_finished_sandboxes_waiting_for_removal_are_bounded(backend, make_pool):
    pool = make_pool(ahead=1)
    finish = threading.Event()
    sandboxes = [backend.create(_spec(f"c{i}")()) for i in range(6)]
    for sandbox in sandboxes:
        destroy = sandbox.destroy
        sandbox.destroy = lambda destroy=destroy: (finish.wait(5), destroy())  # type: ignore[method-assign]
    given_back: list[str] = []

    def give_back_all() -> None:
        for sandbox in sandboxes:
            pool.release(sandbox.spec.case_id, sandbox)
            given_back.append(sandbox.spec.case_id)

    giver = threading.Thread(target=give_back_all)
    giver.start()
    _wait_for(lambda: len(given_back) == 3, "the backlog filled")  # ahead 1 + 2 removers
    time.sleep(0.05)
    assert len(given_back) == 3  # the fourth waits for a removal
    finish.set()
    giver.join(5)
    pool.close()
    assert len(given_back) == 6 and backend.live == []


def test_without_a_pool_a_sandbox_is_made_when_asked_and_removed_when_given_back(backend):
    direct = DirectSandboxes(backend)
    sandbox = direct.take("c1", _spec("c1"))
    assert backend.live == [sandbox]
    direct.release("c1", sandbox)
    assert backend.live == [] and direct.take("c1", _spec("c1")) is not sandbox
