"""The in-container hook client's pure parts: arguments and reading the broker's answer."""

from __future__ import annotations

import json

import pytest

from agent_eval_sandbox.inside import hook_client
from agent_eval_sandbox.inside.paths import BROKER_SOCKET
from agent_eval_sandbox.interception import broker
from agent_eval_sandbox.interception.settings import HOOK_TIMEOUT_S

DENY = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}
ALLOW = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {}}}


def reply(**data) -> bytes:
    return json.dumps(data).encode()


def test_client_and_broker_speak_the_same_protocol():
    assert hook_client.PROTOCOL_LINE == broker.PROTOCOL_LINE
    assert hook_client.DEFAULT_SOCKET == BROKER_SOCKET
    assert hook_client.DEFAULT_TIMEOUT_S < HOOK_TIMEOUT_S
    assert broker.BrokerLimits().answer_budget_s < hook_client.DEFAULT_TIMEOUT_S


def test_arguments():
    assert hook_client.parse_args([]) == (BROKER_SOCKET, hook_client.DEFAULT_TIMEOUT_S)
    assert hook_client.parse_args(["--socket", "/x.sock", "--timeout", "2.5"]) == ("/x.sock", 2.5)


@pytest.mark.parametrize("argv", [["--socket"], ["--port", "1"], ["--timeout", "soon"], ["--timeout", "0"], ["x"]])
def test_bad_arguments_fail(argv):
    with pytest.raises(hook_client.HookFailure):
        hook_client.parse_args(argv)


def test_a_pass_prints_nothing():
    assert hook_client.interpret(reply(decision="pass", reason="", hook_output=None)) == (None, 0, None)


def test_an_allow_without_output_prints_nothing():
    assert hook_client.interpret(reply(decision="allow", reason="env ok", hook_output=None)) == (None, 0, None)


def test_an_allow_prints_the_output():
    stdout, code, stderr = hook_client.interpret(reply(decision="allow", hook_output=ALLOW))
    assert (json.loads(stdout), code, stderr) == (ALLOW, 0, None)


def test_a_deny_prints_the_output_and_exits_2_with_the_reason():
    stdout, code, stderr = hook_client.interpret(reply(decision="deny", hook_output=DENY))
    assert (json.loads(stdout), code, stderr) == (DENY, 2, "no")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"garbage",
        b"[]",
        reply(decision="maybe", hook_output=None),
        reply(decision="deny", hook_output=None),
        reply(decision="pass", hook_output=ALLOW),
        reply(decision="allow", hook_output=DENY),
        reply(decision="deny", hook_output=ALLOW),
        reply(decision="allow", hook_output={"hookSpecificOutput": "allow"}),
        reply(decision="allow", hook_output={"hookSpecificOutput": {**ALLOW["hookSpecificOutput"], "hookEventName": "Stop"}}),
    ],
)
def test_anything_incoherent_is_a_failure(raw):
    with pytest.raises(hook_client.HookFailure):
        hook_client.interpret(raw)


def test_a_failure_becomes_a_deny(monkeypatch):
    with open("/dev/null") as devnull:
        monkeypatch.setattr(hook_client.sys, "stdin", devnull)
        stdout, code, stderr = hook_client.run(["--socket", "/nonexistent/broker.sock", "--timeout", "5"])
    assert code == 2
    output = json.loads(stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert "not reachable at /nonexistent/broker.sock" in output["permissionDecisionReason"]
    assert stderr == output["permissionDecisionReason"]
