"""Running a run's cases, `parallelism` at once, in order of submission."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from agent_eval_sandbox import exit_codes
from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.runner.case import interrupted_outcome, run_case, uncollected_outcome
from agent_eval_sandbox.runner.case_values import ChannelUse
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.plan import Invocation


@dataclass(frozen=True)
class Scheduled:
    """Every invocation's outcome, in order; `interrupted_by` the Ctrl-C/SIGTERM that stopped the run."""

    outcomes: list[CaseOutcome]
    interrupted_by: KeyboardInterrupt | SystemExit | None = None

    @property
    def exit_code(self) -> int | None:
        """130 (SIGINT) or 143 (SIGTERM) once interrupted, else None."""
        if isinstance(self.interrupted_by, KeyboardInterrupt):
            return exit_codes.SIGINT
        if isinstance(self.interrupted_by, SystemExit):
            code = self.interrupted_by.code
            return code if isinstance(code, int) else exit_codes.SIGTERM
        return None


def run_cases(ctx: RunContext, invocations: Sequence[Invocation], statuses: Sequence[CaseStatus],
              *, exit_first: bool = False) -> Scheduled:
    """Every invocation's outcome, in order.

    `exit_first` (`run -x`): once a case does not complete, no further case starts; those get an
    `interrupted` outcome saying why (cases already running finish).

    On Ctrl-C or SIGTERM (an exception out of the wait: `sandbox/teardown.run_scope` has removed
    the run's sandboxes by then), cases not started yet never start and get an `interrupted`
    outcome, and the ones running end with their sandboxes; the run's outcomes are returned
    with what interrupted it, for the caller to record before it exits.
    """
    pool = ThreadPoolExecutor(max_workers=max(1, ctx.settings.parallelism), thread_name_prefix="case")
    one_case = _stopping_at_first_failure(threading.Event()) if exit_first else run_case
    futures = [
        # The slot names the case's staging directory: short, for the unix socket paths in it.
        pool.submit(one_case, ctx, invocation, status, f"{index:04d}")
        for index, (invocation, status) in enumerate(zip(invocations, statuses, strict=True))
    ]
    interrupted_by: KeyboardInterrupt | SystemExit | None = None
    try:
        for future in futures:
            future.result()
    except (KeyboardInterrupt, SystemExit) as exc:
        interrupted_by = exc
        ctx.cancelled.set()
        pool.shutdown(wait=False, cancel_futures=True)
        _drain(ctx, futures)
    except BaseException:
        ctx.cancelled.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    outcomes = [_outcome(ctx, future, invocation, status)
                for future, invocation, status in zip(futures, invocations, statuses, strict=True)]
    return Scheduled(outcomes, interrupted_by)


EXIT_FIRST = "not started: -x/--exit-first stopped the run after a case that did not complete"


def _stopping_at_first_failure(stop: threading.Event) -> Callable[[RunContext, Invocation, CaseStatus, str],
                                                                   CaseOutcome]:
    def one_case(ctx: RunContext, invocation: Invocation, status: CaseStatus, slot: str) -> CaseOutcome:
        if stop.is_set():
            status.state = "skipped"
            return uncollected_outcome(ctx, invocation, ctx.run_dir.case(invocation.id), None, 0.0, ChannelUse(),
                                       EXIT_FIRST, end_reason="interrupted")
        outcome = run_case(ctx, invocation, status, slot)
        if not outcome.completed:
            stop.set()
        return outcome

    return one_case


# While the started cases end after an interrupt: how often the run's sandboxes are swept again.
SWEEP_INTERVAL_S = 1.0


def _drain(ctx: RunContext, futures: Sequence[Future[CaseOutcome]]) -> None:
    """Wait for the cases already started, removing the run's sandboxes again and again meanwhile:
    one being created while the first sweep ran would otherwise hold its case (and the run) until its
    deadline."""
    while not all(future.done() for future in futures):
        with contextlib.suppress(Exception):  # the run's final teardown tries again
            ctx.backend.destroy_run(ctx.run_id)
        wait(futures, timeout=SWEEP_INTERVAL_S)


def _outcome(ctx: RunContext, future: Future[CaseOutcome], invocation: Invocation, status: CaseStatus) -> CaseOutcome:
    if future.done() and not future.cancelled():
        return future.result()
    # Cancelled before it started: it never ran, and says so.
    outcome = interrupted_outcome(ctx, invocation)
    status.state = "interrupted"
    return outcome
