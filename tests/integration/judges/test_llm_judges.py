"""LLM judges through the real anthropic SDK, against the scripted model server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.report.build import ScoreResult
from tests.integration.judges.conftest import FAST_RETRY
from tests.unit.judges.rundir_fixture import (
    assistant,
    case_result,
    make_project,
    make_run,
)

StartServer = Callable[..., ScriptedModelServer]


def _score(tmp_path: Path, judges_yaml: str, *, cases: int = 1, extra_yaml: str = "", files: dict[str, Any] | None = None,
           **kwargs: Any) -> ScoreResult:
    eval_yaml = f"name: llm\ndataset: {{path: dataset}}\noutputs: [{{path: artifacts}}]\n{extra_yaml}\njudges:\n{judges_yaml}"
    config = make_project(tmp_path, eval_yaml, {f"c{i}": {"input": {"prompt": f"Task {i}"}} for i in range(cases)}, extra=files)
    run = make_run(tmp_path, config, {
        f"c{i}": {"run_result.json": case_result(), "artifacts/report.md": f"Report {i}",
                  "events.json": [assistant(f"Answer {i}", thinking="secret plan")]}
        for i in range(cases)
    })
    return score_run(run, retry=FAST_RETRY, parallelism=1, **kwargs)


def _value(result: ScoreResult, judge: str, case: str = "c0") -> Any:
    return result.summary.per_case[case][judge]


def test_a_numeric_judge_gets_the_scale_and_the_rendered_prompt(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([{"tool": "submit_score", "input": {"score": 2, "rationale": "partial"}}])
    result = _score(tmp_path, """
  - name: quality
    prompt: "Grade {{ outputs }} against {{ inputs }} with {{ arguments.level }}.\\n{{ conversation }}"
    score_range: [0, 2]
    arguments: {level: strict}
    context: [guide.md]
""", extra_yaml="models: {judge: judge-from-config}", files={"guide.md": "Be fair."})
    assert _value(result, "quality").value == 2
    assert _value(result, "quality").rationale == "partial"
    (request,) = server.requests
    body = request.body
    assert body["model"] == "judge-from-config"
    assert body["tool_choice"] == {"type": "tool", "name": "submit_score"}
    (tool,) = body["tools"]
    assert tool["input_schema"]["properties"]["score"] == {
        "type": "integer", "minimum": 0, "maximum": 2, "description": "The score: an integer from 0 (worst) to 2 (best)."}
    assert "an integer from 0 (worst) to 2 (best)" in body["system"]
    prompt = body["messages"][0]["content"]
    assert "### artifacts/report.md\n\nReport 0" in prompt and "**prompt**: Task 0" in prompt
    assert "with strict." in prompt and "Answer 0" in prompt and "secret plan" not in prompt
    assert prompt.endswith("## Context: guide.md\n\nBe fair.")
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert "test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


def test_a_boolean_judge_and_an_llm_builtin(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([
        {"tool": "submit_evaluation", "input": {"passed": True, "rationale": "cited"}},
        {"tool": "submit_evaluation", "input": {"passed": False, "rationale": "misses error handling"}},
    ])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVAL_JUDGE_MODEL", "judge-from-env")
        result = _score(tmp_path, """
  - name: cited
    llm_rubric: "The agent cited its sources."
    feedback_type: bool
  - name: complete
    builtin: quality/output_completeness
    arguments: {strictness: high, criteria: ["Error handling is described"]}
""")
    assert _value(result, "cited").value is True
    assert _value(result, "complete").value is False and _value(result, "complete").rationale == "misses error handling"
    rubric, builtin = (r.body for r in server.requests)
    assert rubric["messages"][0]["content"] == "The agent cited its sources.\n\n# Agent Response to Evaluate\n\nAnswer 0"
    assert builtin["tool_choice"] == {"type": "tool", "name": "submit_evaluation"}
    assert "- Error handling is described" in builtin["messages"][0]["content"]
    assert {rubric["model"], builtin["model"]} == {"judge-from-env"}
    assert result.summary.judges["complete"].pass_rate == 0.0


def test_samples_reduce_by_median_low_and_strict_majority(tmp_path: Path, model_server: StartServer) -> None:
    model_server([
        {"tool": "submit_score", "input": {"score": 5, "rationale": "five"}},
        {"tool": "submit_score", "input": {"score": 2, "rationale": "two"}},
        {"tool": "submit_score", "input": {"score": 4, "rationale": "four"}},
        {"tool": "submit_evaluation", "input": {"passed": True, "rationale": "yes"}},
        {"tool": "submit_evaluation", "input": {"passed": False, "rationale": "no"}},
    ])
    result = _score(tmp_path, """
  - name: quality
    prompt: "Grade it"
    score_range: [1, 5]
    samples: 3
    model: m
  - name: ok
    prompt: "Pass?"
    feedback_type: bool
    samples: 2
    model: m
""")
    quality = _value(result, "quality")
    assert quality.value == 4 and quality.rationale == "four"
    assert quality.stability.values == [5, 2, 4] and quality.stability.stable is False
    ok = _value(result, "ok")
    assert ok.value is False and ok.rationale == "no" and ok.stability.pass_count == 1  # a tie fails
    assert result.summary.judges["quality"].stability.stable_cases == 0


def test_the_samples_override_applies_to_llm_judges_only(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([{"tool": "submit_evaluation", "input": {"passed": True, "rationale": "y"}}], advance="per_turn")
    result = _score(tmp_path, """
  - name: ok
    prompt: "Pass?"
    feedback_type: bool
    model: m
  - name: det
    check: "return True, ''"
""", samples=3)
    assert len(server.requests) == 3
    assert _value(result, "ok").stability.samples == 3 and _value(result, "det").stability is None


def test_transient_errors_are_retried(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([
        {"error": {"status": 529}},
        {"error": {"status": 429}},
        {"tool": "submit_score", "input": {"score": 3, "rationale": "ok"}},
    ])
    result = _score(tmp_path, "  - name: q\n    prompt: p\n    score_range: [1, 5]\n    model: m\n")
    assert _value(result, "q").value == 3
    assert [r.status for r in server.requests] == [529, 429, 200]


def test_exhausted_retries_and_client_errors_are_error_samples(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([{"error": {"status": 503}}] * 3 + [{"error": {"status": 400, "message": "prompt is too long"}}])
    result = _score(tmp_path, "  - name: q\n    prompt: p\n    score_range: [1, 5]\n    model: m\n", cases=2)
    first, second = _value(result, "q", "c0"), _value(result, "q", "c1")
    assert first.status == "error" and "failed after 3 attempts: HTTP 503" in first.error
    assert second.status == "error" and "HTTP 400 invalid_request_error: prompt is too long" in second.error
    assert len(server.requests) == 4  # a 400 is not retried


@pytest.mark.parametrize(
    ("tool_input", "error"),
    [
        ({"score": 4, "rationale": "r", "confidence": "high"}, "the verdict has unexpected key(s) 'confidence'"),
        ({"score": "four", "rationale": "r"}, "'score' must be a number, got 'four' (str)"),
        ({"rationale": "r"}, "the verdict is missing 'score'"),
        ({"score": 9, "rationale": "r"}, "returned 9, outside its declared score_range [1, 5]"),
    ],
)
def test_malformed_verdicts_fail_the_sample_and_the_threshold(tmp_path: Path, model_server: StartServer,
                                                               tool_input: dict[str, Any], error: str) -> None:
    model_server([{"tool": "submit_score", "input": tool_input}], advance="per_turn")
    result = _score(tmp_path, "  - name: q\n    prompt: p\n    score_range: [1, 5]\n    model: m\n",
                    extra_yaml="thresholds: {q: {min_mean: 1}}", cases=2)
    assert all(r["q"].status == "error" and r["q"].error == error for r in result.summary.per_case.values())
    assert [c.line() for c in result.summary.thresholds.regressions] == [
        "[q] mean: >= 1.0 -> n/a   mean unavailable — judge errored on 2 cases; see the per-case rationales"
    ]
    assert result.exit_code == 1


def test_a_judge_without_a_model_errors_without_calling_anything(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([{"tool": "submit_score", "input": {"score": 3, "rationale": "r"}}])
    result = _score(tmp_path, "  - name: q\n    llm_rubric: ok?\n    score_range: [1, 5]\n")
    assert _value(result, "q").error == (
        "no model for LLM judge 'q': set `model:` on the judge, `models.judge` in eval.yaml, "
        "or the EVAL_JUDGE_MODEL environment variable"
    )
    assert server.requests == []


def test_missing_credentials_are_an_error_sample(tmp_path: Path, model_server: StartServer, monkeypatch: pytest.MonkeyPatch) -> None:
    model_server([{"tool": "submit_score", "input": {"score": 3, "rationale": "r"}}])
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = _score(tmp_path, "  - name: q\n    prompt: p\n    model: m\n")
    assert "no credentials for the judge model: set ANTHROPIC_API_KEY" in _value(result, "q").error


def test_a_prompt_that_fails_to_render_errors_that_case(tmp_path: Path, model_server: StartServer) -> None:
    server = model_server([{"tool": "submit_score", "input": {"score": 3, "rationale": "r"}}])
    result = _score(tmp_path, "  - name: q\n    prompt: \"{{ outputs.files['nope'].upper() }}\"\n    model: m\n")
    assert "the judge prompt failed to render" in _value(result, "q").error
    assert server.requests == []
