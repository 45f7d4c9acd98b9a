"""`compile-handlers --llm`: the hook model (scripted, through the anthropic SDK) fills the checks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.gateway import ScriptedModelServer
from agent_eval_sandbox.interception.compiler import (
    compile_handlers,
    write_handlers,
)
from agent_eval_sandbox.interception.handlers import HandlersError
from agent_eval_sandbox.model_api import RetryPolicy

from .conftest import served

EVAL = """\
models: {hook: claude-haiku-4-5}
inputs:
  tools:
    - match: Questions asked to the user via AskUserQuestion.
      prompt: Pick the first option.
    - match: Any interaction with Jira — via mcp__atlassian__* or scripts calling the Jira API.
      prompt: Only allow if JIRA_SERVER points to a test instance or emulator.
"""
GOOD = '{"input_filters": ["\\\\bjira\\\\b", "JIRA_SERVER"], "env_checks": {"JIRA_SERVER": {"must_contain": ["Localhost", "emulator", "test"]}}}'


@pytest.fixture
def loaded(tmp_path: Path):
    (tmp_path / "eval.yaml").write_text(EVAL)
    return load_eval_config(tmp_path / "eval.yaml")


def script(tmp_path: Path, *steps: dict) -> Path:
    path = tmp_path / "hook_model.yaml"
    path.write_text(yaml.safe_dump({"advance": "per_request", "steps": list(steps)}))
    return path


def test_the_hook_model_fills_input_filters_and_env_checks(loaded, tmp_path):
    with ScriptedModelServer(script(tmp_path, {"text": f"```json\n{GOOD}\n```"})) as model:
        target = write_handlers(loaded, llm=True, environ={"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"})
        (request,) = served(model, 1)  # the AskUserQuestion handler needs no checks
    assert target == tmp_path / "tool_handlers.yaml"
    body = request.body
    assert body["model"] == "claude-haiku-4-5"
    assert "Only allow if JIRA_SERVER points to a test instance" in body["messages"][0]["content"]
    assert '"mcp__atlassian__*"' in body["messages"][0]["content"]
    written = yaml.safe_load(target.read_text())
    jira = written["handlers"][1]
    assert jira["patterns"] == ["mcp__atlassian__*"]
    assert jira["input_filters"] == ["\\bjira\\b", "JIRA_SERVER"]
    assert jira["env_checks"] == {"JIRA_SERVER": {"must_contain": ["localhost", "emulator", "test"]}}
    assert "input_filters" not in written["handlers"][0]
    # The next run uses the file as it is.
    handlers = compile_handlers(loaded)
    assert handlers is not None and handlers.handlers[1].input_filters == jira["input_filters"]


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("I would filter on jira.", "is not JSON"),
        ('{"input_filters": ["jira("]}', "has an invalid regex 'jira\\('"),
        ('{"input_filters": ["jira"], "env_checks": {"JIRA_SERVER": "test"}}', "is not {must_contain"),
    ],
)
def test_a_bad_answer_is_one_error_and_nothing_is_written(loaded, tmp_path, reply, problem):
    previous = tmp_path / "tool_handlers.yaml"
    with ScriptedModelServer(script(tmp_path, {"text": reply})) as model:
        env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}
        with pytest.raises(HandlersError, match=problem) as info:
            write_handlers(loaded, llm=True, environ=env)
    assert "\n" not in str(info.value) and "eval.yaml" in str(info.value)
    assert not previous.exists()
    assert not list(tmp_path.glob(".tool_handlers.yaml.*"))


def test_an_unreachable_hook_model_is_one_error(loaded, tmp_path, monkeypatch):
    monkeypatch.setattr("agent_eval_sandbox.interception.refine.ANSWER_RETRY", RetryPolicy(attempts=2, initial_wait_s=0.01))
    with ScriptedModelServer(script(tmp_path, {"error": {"status": 529}}, {"error": {"status": 529}})) as model:
        with pytest.raises(HandlersError, match=r"asking the hook model 'claude-haiku-4-5' .* failed: OverloadedError"):
            write_handlers(loaded, llm=True, environ={"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"})
        assert len(served(model, 2)) == 2


def test_no_credentials_is_one_error(loaded, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(HandlersError, match="no credentials for the hook model"):
        write_handlers(loaded, llm=True, environ={})


def test_write_without_llm_needs_no_model(loaded, tmp_path):
    target = write_handlers(loaded, tmp_path / "review.yaml")
    assert textwrap.dedent(target.read_text()).startswith("handlers:\n- match: Questions asked")
