"""The real `claude -p` (2.1.332) on the host with our generated hooks, the real hook client and a real broker.

The host has no managed-settings file of ours (and the CLI ignores hooks
given with `--managed-settings`), so here both hooks — the gate and the
question answerer — come in through `--settings`. What only the managed tier
gives (a gate the workspace cannot switch off) is tested in a container, in
test_interception_container.py. The settings are the ones
`build_container_settings` generates, with only the client's command changed
to point at the host's copy and the test's socket.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.gateway import ScriptedModelServer
from agent_eval_sandbox.interception.answerer import AnthropicAnswerer
from agent_eval_sandbox.interception.handlers import ToolHandlers
from agent_eval_sandbox.interception.settings import (
    HOOK_COMMAND,
    build_container_settings,
    deep_merge,
)

from .conftest import client_command, handlers_of, served

FAKE_MCP_SERVER = Path(__file__).with_name("fake_mcp_server.py")
QUESTION = {
    "question": "What priority should this have?",
    "header": "Priority",
    "multiSelect": False,
    "options": [{"label": "High", "description": "urgent"}, {"label": "Normal", "description": "default"}],
}
ASK = {"match": "Questions asked to the user via AskUserQuestion.", "patterns": ["AskUserQuestion"],
       "prompt": "Answer from answers.yaml."}
JIRA = {
    "match": "Any Jira interaction via MCP tools or scripts calling the Jira API.",
    "patterns": ["Bash", "mcp__atlassian__*"],
    "input_filters": ["\\bjira\\b", "JIRA_SERVER"],
    "env_checks": {"JIRA_SERVER": {"must_contain": ["localhost", "emulator", "test"]}},
    "prompt": "Only allow if JIRA_SERVER points to a test instance.",
}


def hook_flags(handlers: ToolHandlers, socket_path: Path, *, command: str | None = None) -> list[str]:
    """The generated settings as CLI flags, both hooks in one `--settings`, with this host's client command."""
    built = build_container_settings(EvalConfig(), handlers, workspace_env={})
    flags, settings = list(built.cli_flags), built.managed_settings
    if "--settings" in flags:
        at = flags.index("--settings")
        settings = deep_merge(settings, json.loads(flags[at + 1]))
        del flags[at : at + 2]
    text = json.dumps(settings).replace(HOOK_COMMAND, command or " ".join(client_command(socket_path)))
    return [*flags, "--settings", text]


def ask_script(*, then: str = "Done.") -> list[dict[str, Any]]:
    return [{"tool": "AskUserQuestion", "input": {"questions": [QUESTION]}}, {"text": then}]


def answered(run) -> str:
    text = run.tool_result_text(0)
    assert "Your questions have been answered" in text, text
    return text


def test_a_question_is_answered_from_case_overrides(start_broker, run_claude, write_script):
    handlers = handlers_of(ASK, JIRA, case_overrides={QUESTION["question"]: "High"})
    broker = start_broker(handlers)
    with ScriptedModelServer(write_script(ask_script())) as agent_model:
        run = run_claude(agent_model.url, hook_flags(handlers, broker.socket))
    assert run.result["subtype"] == "success", run.stderr
    assert f'"{QUESTION["question"]}"="High"' in answered(run)
    assert run.result["permission_denials"] == []
    (record,) = broker.records()  # asked by both hooks, decided and logged once
    assert record["tool_name"] == "AskUserQuestion" and record["answers"] == {QUESTION["question"]: "High"}
    assert record["tool_use_id"] == run.tool_results()[0]["tool_use_id"]
    assert record["answer_details"][0]["tier"] == "override"


def test_a_question_is_answered_by_the_hook_model(start_broker, run_claude, write_script):
    handlers = handlers_of(ASK, hook_model="claude-haiku-4-5-20251001")
    with ScriptedModelServer(write_script([{"text": "Normal"}], "hook_model.yaml")) as hook_model:
        broker = start_broker(handlers, answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": hook_model.url, "ANTHROPIC_API_KEY": "host-key"}))
        with ScriptedModelServer(write_script(ask_script())) as agent_model:
            run = run_claude(agent_model.url, hook_flags(handlers, broker.socket))
        (request,) = served(hook_model, 1)
    assert f'"{QUESTION["question"]}"="Normal"' in answered(run)
    # The host's credentials went to the hook model; the case context with them, not through the agent.
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert "host-key" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert "title: Fix the login bug" in request.body["messages"][0]["content"]
    assert broker.records()[0]["answer_details"][0]["tier"] == "llm"


def test_a_question_falls_back_to_the_first_option(start_broker, run_claude, write_script):
    handlers = handlers_of(ASK)
    with ScriptedModelServer(write_script([{"text": "Medium"}], "hook_model.yaml")) as hook_model:
        broker = start_broker(handlers, answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": hook_model.url, "ANTHROPIC_API_KEY": "k"}))
        with ScriptedModelServer(write_script(ask_script())) as agent_model:
            run = run_claude(agent_model.url, hook_flags(handlers, broker.socket))
    assert f'"{QUESTION["question"]}"="High"' in answered(run)
    details = broker.records()[0]["answer_details"][0]
    assert (details["tier"], details["llm_raw"]) == ("fallback", "Medium")
    assert any("AskUserQuestion fallback" in warning for warning in broker.warnings)


def fake_jira(tmp_path: Path) -> tuple[Path, Path]:
    """A `jira` command on PATH that records that it ran."""
    bin_dir, marker = tmp_path / "bin", tmp_path / "jira-ran.txt"
    bin_dir.mkdir()
    script = bin_dir / "jira"
    script.write_text(f'#!/bin/sh\necho "$JIRA_SERVER $*" >> {marker}\necho created TEST-1\n')
    script.chmod(0o755)
    return bin_dir, marker


@pytest.mark.parametrize(
    ("server", "allowed"),
    [("http://localhost:2990/jira", True), ("https://jira-emulator.internal", True), ("https://jira.example.com", False)],
)
def test_a_jira_call_runs_only_against_a_test_instance(start_broker, run_claude, write_script, tmp_path, server, allowed):
    handlers = handlers_of(JIRA)
    # The case's configured environment, as the host gives it to the agent and the broker.
    case_env = {"JIRA_SERVER": server}
    broker = start_broker(handlers, env=case_env)
    bin_dir, marker = fake_jira(tmp_path)
    script = [{"tool": "Bash", "input": {"command": 'jira issue create --summary "Login bug"'}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, hook_flags(handlers, broker.socket),
                         env={**case_env, "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"})
    (record,) = broker.records()
    if allowed:
        assert marker.read_text() == f"{server} issue create --summary Login bug\n"
        assert "created TEST-1" in run.tool_result_text(0)
        assert record["decision"] == "allow" and record["reason"] == "env checks passed"
        assert run.result["permission_denials"] == []
    else:
        assert not marker.exists()
        reason = f"Env JIRA_SERVER='{server}' doesn't match required: ['localhost', 'emulator', 'test']"
        assert reason in run.tool_result_text(0)
        assert run.tool_results()[0]["is_error"] is True
        assert record["decision"] == "deny" and record["reason"] == reason
        assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Bash"]


def test_other_bash_commands_pass_through_a_jira_gate(start_broker, run_claude, write_script):
    handlers = handlers_of(JIRA)
    broker = start_broker(handlers, env={"JIRA_SERVER": "https://jira.example.com"})
    script = [{"tool": "Bash", "input": {"command": "echo hello > hello.txt"}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, hook_flags(handlers, broker.socket))
    assert (run.cwd / "hello.txt").read_text() == "hello\n"
    assert broker.records()[0]["decision"] == "pass"


def mcp_flags(calls: Path) -> list[str]:
    config = {"mcpServers": {"atlassian": {"command": sys.executable, "args": [str(FAKE_MCP_SERVER), str(calls)]}}}
    return ["--mcp-config", json.dumps(config), "--strict-mcp-config"]


def test_an_mcp_call_is_denied_by_glob(start_broker, run_claude, write_script, tmp_path):
    block = {"match": "Any interaction with mcp__atlassian__* tools.", "patterns": ["mcp__atlassian__*"]}
    handlers = handlers_of(block)
    broker = start_broker(handlers)
    calls = tmp_path / "mcp-calls.jsonl"
    script = [{"tool": "mcp__atlassian__create_issue", "input": {"summary": "Login bug"}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, [*hook_flags(handlers, broker.socket), *mcp_flags(calls)])
    assert "Blocked by eval harness: Any interaction with mcp__atlassian__* tools." in run.tool_result_text(0)
    assert not calls.exists()  # the server never saw the call
    (record,) = broker.records()
    assert (record["tool_name"], record["decision"]) == ("mcp__atlassian__create_issue", "deny")
    assert record["tool_input"] == {"summary": "Login bug"}


def test_an_mcp_call_passes_its_env_checks(start_broker, run_claude, write_script, tmp_path):
    handlers = handlers_of(JIRA)
    broker = start_broker(handlers, env={"JIRA_SERVER": "http://localhost:2990"})
    calls = tmp_path / "mcp-calls.jsonl"
    script = [{"tool": "mcp__atlassian__create_issue", "input": {"summary": "Login bug"}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, [*hook_flags(handlers, broker.socket), *mcp_flags(calls)])
    assert "created FAKE-1" in run.tool_result_text(0)
    assert json.loads(calls.read_text())["arguments"] == {"summary": "Login bug"}
    assert broker.records()[0]["decision"] == "allow"


def test_a_misconfigured_bash_handler_warns_and_lets_commands_run(start_broker, run_claude, write_script):
    handlers = handlers_of({"match": "Any Bash scripts calling the Jira API", "patterns": ["Bash"]})
    broker = start_broker(handlers)
    script = [{"tool": "Bash", "input": {"command": "echo ran > ran.txt"}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, hook_flags(handlers, broker.socket))
    assert (run.cwd / "ran.txt").exists()
    assert len(broker.warnings) == 1 and "has 'Bash' in patterns but no input_filters" in broker.warnings[0]


def test_no_broker_means_every_call_is_denied(run_claude, write_script, sock_dir):
    handlers = handlers_of(JIRA)
    script = [{"tool": "Bash", "input": {"command": "echo ran > ran.txt"}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, hook_flags(handlers, sock_dir / "nobody.sock"))
    assert not (run.cwd / "ran.txt").exists()
    assert "broker is not reachable" in run.tool_result_text(0) and "fail closed" in run.tool_result_text(0)
    assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Bash"]


@pytest.mark.parametrize("command", ["sh -c 'kill -9 $$'", "sh -c 'exit 1'", "sh -c 'sleep 30'"])
def test_a_killed_crashed_or_hung_hook_blocks_the_call(run_claude, write_script, command, monkeypatch, sock_dir):
    # What onFailure: block buys: SIGKILL cannot be caught by the client, and without
    # it the CLI lets a call through when its hook dies (measured with 2.1.332).
    monkeypatch.setattr("agent_eval_sandbox.interception.settings.HOOK_TIMEOUT_S", 2)
    script = [{"tool": "Bash", "input": {"command": "echo ran > ran.txt"}}, {"text": "Done."}]
    with ScriptedModelServer(write_script(script)) as agent_model:
        run = run_claude(agent_model.url, hook_flags(handlers_of(JIRA), sock_dir / "unused.sock", command=command))
    assert not (run.cwd / "ran.txt").exists()
    assert 'blocking because onFailure is "block"' in run.tool_result_text(0)
