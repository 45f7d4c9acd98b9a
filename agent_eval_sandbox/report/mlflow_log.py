"""A judged run to MLflow (`mlflow:` in eval.yaml; the optional extra `agent-eval-sandbox[mlflow]`).

One MLflow run per run, named by its run id, in the experiment `mlflow.experiment` (else the eval's
name), at `mlflow.tracking_uri`, else $MLFLOW_TRACKING_URI, else http://127.0.0.1:5000: params, a
`<judge>/mean` and `<judge>/pass_rate` metric per judge and the run's own figures, the reports and
each case's transcript as artifacts, and one trace per case (its prompt, end reason, final text and
verdicts). As in the reference, tracking never fails a run: a missing package or an unreachable store is
a warning. `tracking_data` is pure; `log_run` is the edge that talks to MLflow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_eval_sandbox.config.models import MlflowConfig
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.read import read_mapping

DEFAULT_TRACKING_URI = "http://127.0.0.1:5000"
# The run's own figures in run_result.json logged as metrics, under these names.
RUN_METRICS = {"cost_usd": "cost_usd", "wall_clock_s": "wall_clock_s", "num_cases": "num_cases",
               "num_turns": "num_turns", "planned": "cases/planned", "finished": "cases/finished"}


@dataclass(frozen=True)
class CaseTrace:
    case_id: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]


@dataclass(frozen=True)
class TrackingData:
    """What one run logs, read from its directory."""

    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    traces: list[CaseTrace] = field(default_factory=list)


def tracking_uri(config: MlflowConfig, environ: Mapping[str, str]) -> str:
    return config.tracking_uri or environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def tracking_data(run: RunDir, config: MlflowConfig) -> TrackingData:
    meta, _ = read_mapping(run.run_json)
    result, _ = read_mapping(run.run_result)
    summary, _ = read_mapping(run.summary_yaml)
    settings = meta.get("settings") if isinstance(meta.get("settings"), dict) else {}
    params = {key: str(value) for key, value in {
        "eval_name": meta.get("eval"), "run_id": meta.get("run_id"), "mode": meta.get("mode"),
        "model": (settings or {}).get("model"), "subagent_model": (settings or {}).get("subagent_model"),
        "offline": meta.get("offline"), "epochs": meta.get("epochs"), "claude_version": meta.get("claude_version"),
        "image": meta.get("image"), "timeout_s": (settings or {}).get("timeout_s"),
        "max_budget_usd": (settings or {}).get("max_budget_usd"), "tool_version": meta.get("version"),
    }.items() if value is not None}
    metrics: dict[str, float] = {}
    judges = summary.get("judges") if isinstance(summary.get("judges"), dict) else {}
    for name, stats in (judges or {}).items():
        for key in ("mean", "pass_rate", "error_rate"):
            value = _number(stats.get(key)) if isinstance(stats, dict) else None
            if value is not None:
                metrics[f"{name}/{key}"] = value
    for key, name in RUN_METRICS.items():
        value = _number(result.get(key))
        if value is not None:
            metrics[name] = value
    thresholds = summary.get("thresholds") if isinstance(summary.get("thresholds"), dict) else {}
    tags = {"regressions_detected": "yes" if (thresholds or {}).get("regressions") else "no",
            "num_judges": str(len(judges or {})), "run_dir": str(run.root), **config.tags}
    return TrackingData(params=params, metrics=metrics, tags=tags, traces=_traces(run, result, summary))


def _traces(run: RunDir, result: Mapping[str, Any], summary: Mapping[str, Any]) -> list[CaseTrace]:
    per_case = result.get("per_case") if isinstance(result.get("per_case"), dict) else {}
    verdicts = summary.get("per_case") if isinstance(summary.get("per_case"), dict) else {}
    traces = []
    for case_id, outcome in (per_case or {}).items():
        if not isinstance(outcome, dict):
            continue
        case = run.case(case_id)
        prompt = case.prompt.read_text(errors="replace") if case.prompt.is_file() else None
        judged = (verdicts or {}).get(case_id) or {}
        traces.append(CaseTrace(
            case_id=case_id,
            inputs={"case_id": case_id, "prompt": prompt},
            outputs={"end_reason": outcome.get("end_reason"), "final_text": outcome.get("result"),
                     "cost_usd": outcome.get("cost_usd"),
                     "judges": {name: {"value": v.get("value"), "status": v.get("status")}
                                for name, v in judged.items() if isinstance(v, dict)}},
        ))
    return traces


def _artifacts(run: RunDir) -> list[tuple[str, str]]:
    """(file, artifact folder): the run's records and reports, each case's transcript and events."""
    files = [(run.summary_yaml, ""), (run.run_result, ""), (run.run_json, ""), (run.report_html, ""),
             (run.epochs_yaml, "")]
    for case_id in run.case_dirs():
        case = run.case(case_id)
        files += [(case.transcript, f"cases/{case_id}"), (case.events, f"cases/{case_id}")]
    return [(str(path), folder) for path, folder in files if path.is_file()]


def log_run(run: RunDir, config: MlflowConfig, *, eval_name: str, environ: Mapping[str, str],
            warn: Callable[[str], None]) -> str | None:
    """Log the judged run; its MLflow run id, or None (with a warning) when it could not be logged."""
    try:
        import mlflow
    except ImportError:
        warn("mlflow: is set in eval.yaml but MLflow is not installed: the run was not logged "
             "(pip install 'agent-eval-sandbox[mlflow]')")
        return None
    data = tracking_data(run, config)
    uri = tracking_uri(config, environ)
    try:
        client = mlflow.MlflowClient(tracking_uri=uri)
        name = config.experiment or eval_name
        found = client.get_experiment_by_name(name)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(name)
        mlflow.set_tracking_uri(uri)  # the traces go through MLflow's global tracer
        logged = client.create_run(experiment_id, run_name=data.params.get("run_id"), tags=data.tags)
        run_id = logged.info.run_id
        for key, value in data.params.items():
            client.log_param(run_id, key, value)
        for key, number in data.metrics.items():
            client.log_metric(run_id, key, number)
        for path, folder in _artifacts(run):
            client.log_artifact(run_id, path, folder or None)
        for trace in data.traces:
            span = mlflow.start_span_no_context(name=trace.case_id, inputs=trace.inputs, experiment_id=experiment_id,
                                                tags={"agent_eval.run_id": data.params.get("run_id", ""),
                                                      "mlflow.sourceRun": run_id})
            span.set_outputs(json.loads(json.dumps(trace.outputs, default=str)))
            span.end()
        flush = getattr(mlflow, "flush_trace_async_logging", None)
        if flush is not None:
            flush()
        client.set_terminated(run_id)
    except Exception as exc:  # noqa: BLE001 - tracking must never fail a judged run
        warn(f"mlflow: the run could not be logged to {uri}: {type(exc).__name__}: {exc}")
        return None
    return str(run_id)
