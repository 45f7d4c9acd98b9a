"""Running a run's cases, `parallelism` at once, in order of submission."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.runner.case import run_case
from agent_eval_sandbox.runner.context import CaseStatus, RunContext
from agent_eval_sandbox.runner.plan import Invocation


def run_cases(ctx: RunContext, invocations: Sequence[Invocation], statuses: Sequence[CaseStatus]) -> list[CaseOutcome]:
    """Every invocation's outcome, in order. On Ctrl-C or SIGTERM (an exception out of the
    wait), cases not started yet never start, and the ones running end with their sandboxes."""
    pool = ThreadPoolExecutor(max_workers=max(1, ctx.settings.parallelism), thread_name_prefix="case")
    try:
        futures = [
            # The slot names the case's staging directory: short, for the unix socket paths in it.
            pool.submit(run_case, ctx, invocation, status, f"{index:04d}")
            for index, (invocation, status) in enumerate(zip(invocations, statuses, strict=True))
        ]
        outcomes = [future.result() for future in futures]
    except BaseException:
        ctx.cancelled.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return outcomes
