"""Judging a finished run: every judge on every case, then summary, reports and thresholds.

`score_run` is the `score RUN_DIR` command and a run's last step. Per case
it builds the `outputs` record once (judges/record.py), then asks each judge
(judges/kinds.py) for its verdict. Whatever one judge does on one case —
raise, hang, crash, answer nonsense — becomes that case's error for that
judge, never the run's. A case whose agent never ran is not judged at all:
every judge's result says so and counts as failing (judges/standing.py); no
agent judge's sandbox starts for it. Agent judges are planned per case and
run last, in sandboxes of their own (app/agent_judging.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval_sandbox.app.agent_judging import JudgeSandboxes, Planned, judge_planned, plan_case
from agent_eval_sandbox.app.validate import load_checked
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.host_env import untrusted_free_env
from agent_eval_sandbox.judges.kinds import AgentJudge, Judge, JudgeServices, JudgeSetup, make_judge
from agent_eval_sandbox.judges.llm import ModelJudge
from agent_eval_sandbox.judges.record import CaseFiles, build_record, read_case_files
from agent_eval_sandbox.judges.results import CaseResult, Sample
from agent_eval_sandbox.judges.standing import not_run_reason, standing
from agent_eval_sandbox.judges.steps import by_step, step_files, step_not_run_reason
from agent_eval_sandbox.judges.worker_pool import WorkerPool, encode_json
from agent_eval_sandbox.model_api import ModelEndpoint, RetryPolicy
from agent_eval_sandbox.report.build import ScoreResult, finish_summary, run_cost, write_reports
from agent_eval_sandbox.report.summary import compute_run_metrics, read_cases, summarize
from agent_eval_sandbox.rundir.layout import CaseDir
from agent_eval_sandbox.rundir.models import CaseOutcome
from agent_eval_sandbox.rundir.read import FinishedRun, open_finished_run
from agent_eval_sandbox.runner.model_access import OfflineModels

DEFAULT_JUDGE_TIMEOUT_S = 60.0
DEFAULT_PARALLELISM = 4
Echo = Callable[[str], None]


def judge_case(judges: list[Judge], record: dict[str, Any],
               services: JudgeServices) -> tuple[dict[str, CaseResult], list[tuple[str, Sample]]]:
    """Every judge on one case: results by judge name, and the samples rejected as off-scale."""
    outputs_json = encode_json(record)
    results: dict[str, CaseResult] = {}
    off_scale: list[tuple[str, Sample]] = []
    for judge in judges:
        result, samples = judge.score(record, outputs_json, services)
        results[judge.name] = result
        off_scale += [(judge.name, s) for s in samples if s.off_scale]
    return results, off_scale


ScoreGroup = Callable[[list[Judge], dict[str, Any]], tuple[dict[str, CaseResult], list[tuple[str, Sample]]]]


def group_scorer(services: JudgeServices, case_id: str, case_dir: Path, planned: Planned,
                 lock: threading.Lock) -> ScoreGroup:
    """Judges of one case on a record: the in-process ones now, the agent judges planned (their
    samples run in sandboxes of their own once every case is through)."""
    def score_group(group: list[Judge], record: dict[str, Any]
                    ) -> tuple[dict[str, CaseResult], list[tuple[str, Sample]]]:
        found, rejected = judge_case([j for j in group if not isinstance(j, AgentJudge)], record, services)
        settled, case_plan = plan_case([j for j in group if isinstance(j, AgentJudge)], record, case_id, case_dir)
        with lock:
            planned.extend(case_plan)
        return {**found, **settled}, rejected

    return score_group


def judge_case_and_steps(judges: list[Judge], scopes: dict[str, str | None], files: CaseFiles,
                         outcome: CaseOutcome | None, config: EvalConfig,
                         score_group: ScoreGroup) -> tuple[dict[str, CaseResult], list[tuple[str, Sample]]]:
    """Whole-case judges on the case's record; each step's judges on the step's own (judges/steps.py).
    `score_group` judges a group on a record: the results it settled (an agent judge's come later)."""
    groups = by_step([(j.name, scopes.get(j.name)) for j in judges])
    results: dict[str, CaseResult] = {}
    off_scale: list[tuple[str, Sample]] = []
    for step_id, names in groups.items():
        group = [j for j in judges if j.name in names]
        if step_id is None:
            found, rejected = score_group(group, build_record(files, config.outputs, config.traces))
            results.update(marked(found, outcome))
            off_scale += rejected
            continue
        skip = step_not_run_reason(outcome, step_id)
        step = outcome.step(step_id) if outcome is not None else None
        if skip is not None or step is None:
            end_reason, reason = skip or ("error", f"not judged: step {step_id} has no recorded outcome")
            results.update({j.name: CaseResult.not_run(j.judge_type, end_reason, reason) for j in group})
            continue
        record = build_record(step_files(files, step, CaseDir(files.case_dir)), config.outputs, config.traces)
        found, rejected = score_group(group, record)
        if not step.completed:
            found = {name: result.marked_incomplete(step.end_reason) for name, result in found.items()}
        results.update(found)
        off_scale += rejected
    return {j.name: results[j.name] for j in judges if j.name in results}, off_scale


def not_judged(judges: list[Judge], outcome: CaseOutcome | None) -> dict[str, CaseResult]:
    """A case whose agent never ran: every judge's result says so, none runs."""
    end_reason, reason = not_run_reason(outcome)
    return {j.name: CaseResult.not_run(j.judge_type, end_reason, reason) for j in judges}


def marked(results: dict[str, CaseResult], outcome: CaseOutcome | None) -> dict[str, CaseResult]:
    """A case that ran but did not complete: its results are marked as judged on what it left."""
    if outcome is None or standing(outcome) != "incomplete":
        return results
    return {name: result.marked_incomplete(outcome.end_reason) for name, result in results.items()}


def _config_for(run: FinishedRun, config_path: Path | str | None) -> LoadedConfig:
    path = Path(config_path) if config_path is not None else run.config_path
    if path is None:
        raise RunDirError(
            f"{run.root}: run.json does not record the eval.yaml the run used",
            fix="pass it explicitly (score RUN_DIR --config path/to/eval.yaml)",
        )
    if not path.exists():
        raise RunDirError(
            f"{path}: the eval.yaml {'given' if config_path is not None else 'recorded in run.json'} does not exist",
            fix="pass the eval.yaml explicitly (score RUN_DIR --config path/to/eval.yaml)",
        )
    return load_checked(path)


def score_run(
    run_dir: Path | str,
    config_path: Path | str | None = None,
    *,
    judge_timeout_s: float = DEFAULT_JUDGE_TIMEOUT_S,
    parallelism: int = DEFAULT_PARALLELISM,
    samples: int | None = None,
    echo: Echo | None = None,
    retry: RetryPolicy | None = None,
    endpoint: ModelEndpoint | None = None,
    offline: bool = False,
    sandboxes: JudgeSandboxes | None = None,
    junit_fail_on_judge: bool = False,
) -> ScoreResult:
    """Judge a finished run (again) and write summary.yaml/json, report.html and junit.xml.

    The config is `config_path`, else the eval.yaml recorded in run.json;
    `samples` overrides every LLM and agent judge's `samples`; `offline` scripts the judges'
    models (judge_script.yaml, judge_scripts/) where `endpoint` and `sandboxes` do not say
    otherwise; `sandboxes` is what agent judges run with (default: made here, `parallelism`
    at once); `junit_fail_on_judge` makes a failing verdict of a judge without a threshold a
    junit failure. Raises RunDirError for a directory that is not a run, ConfigError for a
    bad eval.yaml; judge failures never raise.
    """
    run = open_finished_run(run_dir)
    loaded = _config_for(run, config_path)
    config: EvalConfig = loaded.config
    say = echo or (lambda _line: None)
    lock = threading.Lock()
    warnings = [*loaded.warnings, *run.problems]
    setup = JudgeSetup(loaded, os.environ, samples)
    judges = [make_judge(j, setup) for j in config.scored_judges]
    scopes = {j.name: j.step for j in config.scored_judges}
    planned: Planned = []
    case_ids = run.case_ids
    say(f"Judging {len(case_ids)} cases with {len(judges)} judges: {', '.join(j.name for j in judges) or 'none'}")

    per_case: dict[str, dict[str, CaseResult]] = {}
    done = 0

    def score(case_id: str, services: JudgeServices) -> None:
        nonlocal done
        problems: tuple[str, ...] = ()
        off_scale: list[tuple[str, Sample]] = []
        outcome = run.outcome(case_id)
        if standing(outcome) == "not_run":
            results = not_judged(judges, outcome)
        else:
            try:
                files = read_case_files(run, case_id, loaded)
                problems = files.problems
                scorer = group_scorer(services, case_id, files.case_dir, planned, lock)
                results, off_scale = judge_case_and_steps(judges, scopes, files, outcome, config, scorer)
            except OSError as exc:  # e.g. a directory we may not read: the case errors, the run goes on
                reason = f"the case's files could not be read: {exc}"
                results = marked({j.name: CaseResult.errored(j.judge_type, reason) for j in judges}, outcome)
        with lock:
            per_case[case_id] = results
            warnings.extend(f"{case_id}: {problem}" for problem in problems)
            done += 1
            say(f"  [{done}/{len(case_ids)}] {case_id}")
            for name, sample in off_scale:
                say(f"  WARNING: {case_id}: judge '{name}' {sample.error}")

    # Judge code runs from the project root (cwd and sys.path), over the run's files as data:
    # nothing of the run directory may be where the worker looks for code.
    with contextlib.ExitStack() as stack:
        if endpoint is None and offline:
            endpoint = stack.enter_context(OfflineModels(loaded).judge_endpoint())
        pool = stack.enter_context(WorkerPool(loaded.root, env=untrusted_free_env(os.environ, [run.root])))
        services = JudgeServices(pool=pool, models=ModelJudge(retry, endpoint=endpoint), timeout_s=judge_timeout_s)
        executor = ThreadPoolExecutor(max_workers=max(1, parallelism))
        try:
            for future in [executor.submit(score, case_id, services) for case_id in case_ids]:
                future.result()
        finally:
            # On Ctrl-C, do not wait out running judges: closing the pool kills their workers.
            executor.shutdown(wait=False, cancel_futures=True)

    if planned:
        lent = sandboxes or JudgeSandboxes(parallelism=parallelism)
        for (case_id, name), (result, agent_samples) in judge_planned(planned, loaded, run, lent, offline=offline,
                                                                      say=say).items():
            per_case[case_id].update(marked({name: result}, run.outcome(case_id)))
            for sample in agent_samples:
                if sample.off_scale:
                    say(f"  WARNING: {case_id}: judge '{name}' {sample.error}")
    # Every case's results in the order of the judges.
    per_case = {case_id: {j.name: per_case[case_id][j.name] for j in judges if j.name in per_case[case_id]}
                for case_id in per_case}

    summary = summarize(
        run_id=run.run_id,
        eval_name=config.name,
        title=config.title,
        config_path=str(loaded.path),
        scored_at=datetime.now(UTC).isoformat(timespec="seconds"),
        judges=[judge.meta for judge in judges],
        per_case={case_id: per_case[case_id] for case_id in case_ids},
        thresholds=config.thresholds,
        run_metrics=compute_run_metrics(run.result),
        cases=read_cases(run, case_ids),
        offline=run.meta.get("offline") is True,
        cost_usd=run_cost(run),
    )
    summary, problems = finish_summary(run, summary, config.reward)
    reports = write_reports(run, summary, junit_fail_on_judge=junit_fail_on_judge)
    return ScoreResult(run_dir=run.root, summary=summary, reports=reports, warnings=[*warnings, *problems])
