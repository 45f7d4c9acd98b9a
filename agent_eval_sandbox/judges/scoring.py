"""Judging a finished run: every judge on every case, then summary, reports and thresholds.

`score_run` is the `score RUN_DIR` command and the runner's last step. Per
case it builds the `outputs` record once, then runs each judge by kind:
python judge code (check, module/function, python builtins) in worker
processes under a time limit, LLM judges (prompts and `.md` builtins)
through the judge model. Whatever one judge does on one case — raise, hang,
crash, answer nonsense — becomes that case's error for that judge, never the
run's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config
from agent_eval_sandbox.config.models import EvalConfig, JudgeConfig
from agent_eval_sandbox.errors import RunDirError
from agent_eval_sandbox.host_env import untrusted_free_env
from agent_eval_sandbox.judges.aggregate import reduce_samples
from agent_eval_sandbox.judges.condition import ConditionError, evaluate_condition
from agent_eval_sandbox.judges.finished_run import FinishedRun, open_finished_run
from agent_eval_sandbox.judges.llm import JudgeEndpoint, ModelJudge, RetryPolicy
from agent_eval_sandbox.judges.prompt import (
    JudgePromptError,
    compile_prompt,
    missing_model_message,
    resolve_judge_model,
)
from agent_eval_sandbox.judges.record import build_record, read_case_files, to_jsonable
from agent_eval_sandbox.judges.registry import find_builtin, unknown_builtin_message
from agent_eval_sandbox.judges.results import CaseResult, Sample
from agent_eval_sandbox.judges.template import PromptRenderError, render_prompt
from agent_eval_sandbox.judges.verdict import Scale, check_value, scale_for
from agent_eval_sandbox.judges.worker_pool import WorkerPool, encode_json
from agent_eval_sandbox.report.build import ScoreResult, write_reports
from agent_eval_sandbox.report.summary import JudgeMeta, compute_run_metrics, summarize

DEFAULT_JUDGE_TIMEOUT_S = 60.0
DEFAULT_PARALLELISM = 4
Echo = Callable[[str], None]


@dataclass(frozen=True)
class PreparedJudge:
    """A judge ready to run: what to execute, or why every case skips or errors."""

    config: JudgeConfig
    judge_type: str
    samples: int = 1
    code_spec: bytes | None = None  # JSON spec for the worker (python judges)
    arguments: bytes = b"{}"
    template: str | None = None  # LLM judges
    scale: Scale | None = None
    model: str | None = None
    unavailable: str | None = None  # every case is skipped with this reason
    broken: str | None = None  # every case errors with this reason

    @property
    def meta(self) -> JudgeMeta:
        return JudgeMeta(self.config.name, self.judge_type, self.config.score_range, self.config.feedback_type)


def prepare_judge(judge: JudgeConfig, loaded: LoadedConfig, environ: Mapping[str, str], samples: int | None) -> PreparedJudge:
    kind = judge.kind
    arguments = encode_json(to_jsonable(judge.arguments))
    if kind == "agent":
        return PreparedJudge(judge, kind, unavailable="agent judges (tool-using) are not implemented by agent-eval-sandbox")
    if kind == "skip":
        return PreparedJudge(judge, kind, unavailable="the judge sets none of builtin, check, llm_rubric/prompt/prompt_file or module+function")
    if kind == "check":
        spec = {"kind": "check", "name": judge.name, "source": judge.check}
        return PreparedJudge(judge, kind, code_spec=encode_json(spec), arguments=arguments)
    if kind == "code":
        spec = {"kind": "module", "module": judge.module, "function": judge.function}
        return PreparedJudge(judge, kind, code_spec=encode_json(spec), arguments=arguments)
    if kind == "builtin":
        entry = find_builtin(judge.builtin or "")
        if entry is None:
            return PreparedJudge(judge, kind, broken=unknown_builtin_message(judge.builtin or ""))
        if entry.kind == "python":
            spec = {"kind": "file", "path": str(entry.path), "function": "judge"}
            return PreparedJudge(judge, kind, code_spec=encode_json(spec), arguments=arguments)
        template = entry.path.read_text(encoding="utf-8")
        scale = scale_for(judge, force_bool=True)
    else:
        try:
            template = compile_prompt(judge, loaded.root)
        except JudgePromptError as exc:
            return PreparedJudge(judge, kind, broken=exc.render())
        scale = scale_for(judge)
    model = resolve_judge_model(judge, loaded.config, environ)
    return PreparedJudge(
        judge, kind,
        samples=samples if samples is not None else judge.samples,
        template=template, scale=scale, model=model,
        broken=None if model else missing_model_message(judge.name),
    )


@dataclass(frozen=True)
class _Services:
    pool: WorkerPool
    models: ModelJudge
    timeout_s: float


def _run_judge(judge: PreparedJudge, record: dict[str, Any], outputs_json: bytes, services: _Services) -> tuple[CaseResult, list[Sample]]:
    kind = judge.judge_type
    if judge.unavailable:
        return CaseResult.skipped(kind, judge.unavailable), []
    condition = judge.config.if_
    if condition is not None:
        try:
            applies = evaluate_condition(condition, record)
        except ConditionError as exc:
            return CaseResult.errored(kind, str(exc)), []
        if not applies:
            return CaseResult.skipped(kind, f"Skipped: condition '{condition}' is false"), []
    if judge.broken:
        return CaseResult.errored(kind, judge.broken), []
    if judge.code_spec is not None:
        with services.pool.worker() as worker:
            sample = worker.call(judge.code_spec, judge.arguments, outputs_json, services.timeout_s)
        sample = check_value(sample, judge.config.score_range)
        return CaseResult.from_sample(kind, sample), [sample]
    assert judge.template is not None and judge.scale is not None and judge.model is not None
    try:
        prompt = render_prompt(judge.template, record, judge.config.arguments)
    except PromptRenderError as exc:
        return CaseResult.errored(kind, str(exc)), []
    samples = [services.models.sample(prompt, judge.scale, judge.model) for _ in range(max(1, judge.samples))]
    return reduce_samples(kind, samples), samples


def _judge_case(
    judges: list[PreparedJudge], record: dict[str, Any], services: _Services
) -> tuple[dict[str, CaseResult], list[tuple[str, Sample]]]:
    """Every judge on one case: results by judge name, and the samples rejected as off-scale."""
    outputs_json = encode_json(record)
    results: dict[str, CaseResult] = {}
    off_scale: list[tuple[str, Sample]] = []
    for judge in judges:
        try:
            result, samples = _run_judge(judge, record, outputs_json, services)
        except Exception as exc:  # a bug of ours must still cost only this judge on this case
            result, samples = CaseResult.errored(judge.judge_type, f"internal error while judging: {type(exc).__name__}: {exc}"), []
        results[judge.config.name] = result
        off_scale += [(judge.config.name, s) for s in samples if s.off_scale]
    return results, off_scale


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
    return load_eval_config(path)


def score_run(
    run_dir: Path | str,
    config_path: Path | str | None = None,
    *,
    judge_timeout_s: float = DEFAULT_JUDGE_TIMEOUT_S,
    parallelism: int = DEFAULT_PARALLELISM,
    samples: int | None = None,
    echo: Echo | None = None,
    retry: RetryPolicy | None = None,
    endpoint: JudgeEndpoint | None = None,
) -> ScoreResult:
    """Judge a finished run (again) and write summary.yaml/json, report.html and junit.xml.

    The config is `config_path`, else the eval.yaml recorded in run.json;
    `samples` overrides every LLM judge's `samples`. Raises RunDirError for a
    directory that is not a run, ConfigError for a bad eval.yaml; judge
    failures never raise.
    """
    run = open_finished_run(run_dir)
    loaded = _config_for(run, config_path)
    config: EvalConfig = loaded.config
    say = echo or (lambda _line: None)
    lock = threading.Lock()
    warnings = [*loaded.warnings, *run.problems]
    judges = [prepare_judge(j, loaded, os.environ, samples) for j in config.scored_judges]
    case_ids = run.case_ids
    say(f"Judging {len(case_ids)} cases with {len(judges)} judges: {', '.join(j.config.name for j in judges) or 'none'}")

    per_case: dict[str, dict[str, CaseResult]] = {}
    done = 0

    def score(case_id: str, services: _Services) -> None:
        nonlocal done
        problems: tuple[str, ...] = ()
        try:
            files = read_case_files(run, case_id, loaded)
            problems = files.problems
            record = build_record(files, config.outputs, config.traces)
        except OSError as exc:  # e.g. a directory we may not read: the case errors, the run goes on
            reason = f"the case's files could not be read: {exc}"
            results = {j.config.name: CaseResult.errored(j.judge_type, reason) for j in judges}
            off_scale: list[tuple[str, Sample]] = []
        else:
            results, off_scale = _judge_case(judges, record, services)
        with lock:
            per_case[case_id] = results
            warnings.extend(f"{case_id}: {problem}" for problem in problems)
            done += 1
            say(f"  [{done}/{len(case_ids)}] {case_id}")
            for name, sample in off_scale:
                say(f"  WARNING: {case_id}: judge '{name}' {sample.error}")

    # Judge code runs from the project root (cwd and sys.path), over the run's files as data:
    # nothing of the run directory may be where the worker looks for code.
    with WorkerPool(loaded.root, env=untrusted_free_env(os.environ, [run.root])) as pool:
        services = _Services(pool=pool, models=ModelJudge(retry, endpoint=endpoint), timeout_s=judge_timeout_s)
        executor = ThreadPoolExecutor(max_workers=max(1, parallelism))
        try:
            for future in [executor.submit(score, case_id, services) for case_id in case_ids]:
                future.result()
        finally:
            # On Ctrl-C, do not wait out running judges: closing the pool kills their workers.
            executor.shutdown(wait=False, cancel_futures=True)

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
    )
    return ScoreResult(run_dir=run.root, summary=summary, reports=write_reports(run, summary), warnings=warnings)
