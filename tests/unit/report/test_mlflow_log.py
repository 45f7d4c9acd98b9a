"""What a run logs to MLflow, read from its directory (pure), and the tracking URI's precedence (no MLflow)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from agent_eval_sandbox.config.models import EvalConfig, MlflowConfig
from agent_eval_sandbox.report.mlflow_log import DEFAULT_TRACKING_URI, tracking_data, tracking_uri
from agent_eval_sandbox.rundir.layout import RunDir


def test_tracking_uri_config_then_environment_then_local_default():
    assert tracking_uri(MlflowConfig(tracking_uri="sqlite:///a.db"), {"MLFLOW_TRACKING_URI": "http://x"}) == (
        "sqlite:///a.db")
    assert tracking_uri(MlflowConfig(), {"MLFLOW_TRACKING_URI": "http://x"}) == "http://x"
    assert tracking_uri(MlflowConfig(), {}) == DEFAULT_TRACKING_URI


def test_the_block_is_modelled_and_its_presence_turns_tracking_on():
    assert EvalConfig.model_validate({}).mlflow is None
    config = EvalConfig.model_validate({"mlflow": {"experiment": "e", "tags": {"suite": 1}}}).mlflow
    assert config is not None and config.experiment == "e" and config.tags == {"suite": "1"}
    assert EvalConfig.model_validate({"mlflow": {}}).mlflow == MlflowConfig()


def test_params_metrics_tags_and_one_trace_per_case(tmp_path: Path):
    run = RunDir.create(tmp_path, "e", "r1")
    run.run_json.write_text(json.dumps({"eval": "e", "run_id": "r1", "offline": True, "epochs": 1,
                                        "settings": {"model": "m", "timeout_s": 60}}))
    run.run_result.write_text(json.dumps({"cost_usd": 0.25, "num_cases": 2, "planned": 2, "finished": 2,
                                          "per_case": {"a": {"end_reason": "exited", "result": "done"},
                                                       "b": {"end_reason": "timed_out"}}}))
    run.summary_yaml.write_text(yaml.safe_dump({
        "judges": {"ok": {"mean": 0.5, "pass_rate": 0.5, "error_rate": 0.0}, "score": {"mean": 3.0}},
        "per_case": {"a": {"ok": {"value": True, "status": "scored"}}, "b": {"ok": {"value": False}}},
        "thresholds": {"regressions": ["ok: pass rate 50% < 80%"]}}))
    run.case("a").path.mkdir(parents=True)
    run.case("a").prompt.write_text("do it")
    data = tracking_data(run, MlflowConfig(tags={"team": "t"}))
    assert data.params["model"] == "m" and data.params["offline"] == "True" and data.params["timeout_s"] == "60"
    assert data.metrics == {"ok/mean": 0.5, "ok/pass_rate": 0.5, "ok/error_rate": 0.0, "score/mean": 3.0,
                            "cost_usd": 0.25, "num_cases": 2.0, "cases/planned": 2.0, "cases/finished": 2.0}
    assert data.tags["regressions_detected"] == "yes" and data.tags["num_judges"] == "2" and data.tags["team"] == "t"
    a, b = data.traces
    assert (a.case_id, a.inputs["prompt"], a.outputs["final_text"]) == ("a", "do it", "done")
    assert a.outputs["judges"] == {"ok": {"value": True, "status": "scored"}}
    assert (b.inputs["prompt"], b.outputs["end_reason"]) == (None, "timed_out")
