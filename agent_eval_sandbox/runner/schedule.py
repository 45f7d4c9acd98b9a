"""Running a run's cases, `parallelism` at once, in order of submission, their sandboxes made ahead."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.runner.case import case_sandbox_spec, run_case
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.sandbox.pool import SandboxPool


def run_cases(ctx: RunContext, invocations: Sequence[Invocation], statuses: Sequence[CaseStatus]) -> list[CaseOutcome]:
    """Every invocation's outcome, in order. On Ctrl-C or SIGTERM (an exception out of the
    wait), cases not started yet never start, and the ones running end with their sandboxes.

    While `parallelism` cases run, the sandboxes of the next `parallelism` are
    made (`sandbox/pool.py`), and finished ones are removed in the background;
    the pool's close, before this returns or raises, removes whatever it holds.
    """
    parallelism = max(1, ctx.settings.parallelism)
    # The slot names the case's staging directory: short, for the unix socket paths in it.
    slots = [f"{index:04d}" for index in range(len(invocations))]
    with SandboxPool(ctx.backend, ahead=min(parallelism, len(invocations)), stop=ctx.cancelled,
                     warn=ctx.warn) as sandboxes:
        for invocation, slot in zip(invocations, slots, strict=True):
            sandboxes.plan(slot, partial(case_sandbox_spec, ctx, invocation.id, ctx.staging / slot))
        pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="case")
        try:
            futures = [
                pool.submit(run_case, ctx, invocation, status, slot, sandboxes)
                for invocation, status, slot in zip(invocations, statuses, slots, strict=True)
            ]
            outcomes = [future.result() for future in futures]
        except BaseException:
            ctx.cancelled.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
    return outcomes
