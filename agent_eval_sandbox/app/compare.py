"""`compare RUN_A RUN_B` and `run --baseline`: a judged run against its baseline.

    both summaries → per-judge deltas and their statistics (compare/deltas.py)
      → the `pairwise` judge, when the eval configures one (compare/pairwise.py)
      → comparison.json in run A → run A's summary and reports rebuilt with it

Run A is the run under test, B its baseline. Nothing of B is written. The
pairwise judge's model is the judge model online, or offline the scripted
one of `pairwise_script.yaml` beside eval.yaml; a case that never ran in
either run is never sent to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval_sandbox.app.validate import load_checked
from agent_eval_sandbox.compare.deltas import DEFAULT_ALPHA, DEFAULT_TOLERANCE, RunResults, compare_results
from agent_eval_sandbox.compare.models import Comparison, PairwiseSummary, RunRef
from agent_eval_sandbox.compare.pairwise import Pair, pairwise_judge, run_pairwise
from agent_eval_sandbox.compare.store import write_comparison
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.errors import RunDirError, UserError
from agent_eval_sandbox.judges.llm import ModelJudge
from agent_eval_sandbox.judges.record import build_record, read_case_files
from agent_eval_sandbox.judges.standing import not_run_cases, standing
from agent_eval_sandbox.model_api import ModelEndpoint
from agent_eval_sandbox.report.build import ScoreResult, build_reports
from agent_eval_sandbox.report.summary import Summary, load_summary
from agent_eval_sandbox.rundir.read import FinishedRun, open_finished_run

Echo = Callable[[str], None]
# Where the pairwise judge calls: the judge model (None: the SDK's environment) or a scripted one.
EndpointFactory = Callable[[LoadedConfig], AbstractContextManager[ModelEndpoint | None]]


@dataclass(frozen=True)
class CompareResult:
    comparison: Comparison
    comparison_path: Path
    score: ScoreResult  # run A's summary and reports, rebuilt with the comparison

    def exit_code(self, fail_on_regression: bool) -> int:
        """0; with `fail_on_regression`, 1 when a judge regressed against the baseline."""
        return 1 if fail_on_regression and self.comparison.regressed else 0

    def to_json(self, fail_on_regression: bool) -> dict[str, Any]:
        return {"comparison_path": str(self.comparison_path), "exit_code": self.exit_code(fail_on_regression),
                "report": str(self.score.reports.html), **self.comparison.to_data()}


def online_endpoint(loaded: LoadedConfig) -> AbstractContextManager[ModelEndpoint | None]:
    return nullcontext(None)


def _results(run: FinishedRun, summary: Summary) -> RunResults:
    ref = RunRef(run_id=summary.run_id or run.run_id, root=str(run.root), eval=summary.eval)
    return RunResults(ref=ref, judges=summary.judges, per_case=summary.per_case,
                      never_ran=not_run_cases(run.outcome, summary.per_case))


def _config(run: FinishedRun, config_path: Path | None, warn: Callable[[str], object]) -> LoadedConfig | None:
    """The eval.yaml for the pairwise judge: the one given, else run A's; None when there is none to read."""
    if config_path is not None:
        return load_checked(config_path)
    recorded = run.config_path
    if recorded is None or not recorded.exists():
        warn(f"{run.root}: the eval.yaml the run used is not there ({recorded}); no pairwise judge "
             "(pass --config to name one)")
        return None
    return load_checked(recorded)


def _pair_loader(run_a: FinishedRun, run_b: FinishedRun, loaded: LoadedConfig) -> Callable[[str], Pair]:
    config = loaded.config

    def record(run: FinishedRun, case_id: str) -> dict[str, Any]:
        return build_record(read_case_files(run, case_id, loaded), config.outputs, config.traces)

    def load(case_id: str) -> Pair:
        stand_a, stand_b = standing(run_a.outcome(case_id)), standing(run_b.outcome(case_id))
        if "not_run" in (stand_a, stand_b):
            return Pair(case_id, None if stand_a == "not_run" else {}, None if stand_b == "not_run" else {})
        try:
            return Pair(case_id, record(run_a, case_id), record(run_b, case_id),
                        incomplete="incomplete" in (stand_a, stand_b))
        except OSError as exc:
            return Pair(case_id, {}, {}, problem=f"the case's files could not be read: {exc}")

    return load


def compare_runs(run_a_dir: Path | str, run_b_dir: Path | str, *, config_path: Path | None = None,
                 endpoint: EndpointFactory = online_endpoint, parallelism: int = 1,
                 alpha: float = DEFAULT_ALPHA, tolerance: float = DEFAULT_TOLERANCE,
                 environ: Mapping[str, str] | None = None, echo: Echo | None = None,
                 junit_fail_on_judge: bool = False) -> CompareResult:
    """Compare run A (under test) with its baseline B; write comparison.json and rebuild A's reports."""
    say = echo or (lambda _line: None)
    run_a, run_b = open_finished_run(run_a_dir), open_finished_run(run_b_dir)
    if run_a.root == run_b.root:
        raise UserError(f"{run_a.root} is compared with itself", fix="give the run under test and its baseline")
    summary_a, summary_b = load_summary(run_a.dir), load_summary(run_b.dir)
    comparison = compare_results(_results(run_a, summary_a), _results(run_b, summary_b),
                                 compared_at=datetime.now(UTC).isoformat(timespec="seconds"),
                                 alpha=alpha, tolerance=tolerance)
    loaded = _config(run_a, config_path, comparison.warnings.append)
    if loaded is not None:
        paired = [case for case in summary_a.per_case if case in summary_b.per_case]
        comparison.pairwise = _pairwise(run_a, run_b, loaded, paired, comparison, endpoint, parallelism, environ,
                                        say)
    write_comparison(run_a.dir, comparison)
    return CompareResult(comparison=comparison, comparison_path=run_a.dir.comparison_json,
                         score=build_reports(run_a.root, junit_fail_on_judge=junit_fail_on_judge))


def _pairwise(run_a: FinishedRun, run_b: FinishedRun, loaded: LoadedConfig, case_ids: list[str],
              comparison: Comparison, endpoint: EndpointFactory, parallelism: int,
              environ: Mapping[str, str] | None, say: Echo) -> PairwiseSummary | None:
    judge = pairwise_judge(loaded, os.environ if environ is None else environ)
    if judge is None:
        return None
    say(f"Pairwise judge '{judge.config.name}': {len(case_ids)} cases, each judged in both orders")
    with endpoint(loaded) as where:
        return run_pairwise(judge, ModelJudge(endpoint=where), case_ids, _pair_loader(run_a, run_b, loaded),
                            run_a=comparison.run_a.run_id, run_b=comparison.run_b.run_id, parallelism=parallelism)


def check_baseline(path: Path) -> None:
    """`run --baseline`: refuse, before anything runs, a baseline that is not a judged run."""
    run = open_finished_run(path)
    try:
        load_summary(run.dir)
    except RunDirError as exc:
        raise RunDirError(f"--baseline {path}: {exc.message}", fix=exc.fix) from None
