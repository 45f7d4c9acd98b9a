"""The real hook client talking to a real broker over a real unix socket."""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_eval_sandbox.cpu_share import CpuShare
from agent_eval_sandbox.gateway import Channel, Credentials, ModelGateway, ScriptedModelServer
from agent_eval_sandbox.interception.answerer import AnthropicAnswerer, MeteredAnswerer
from agent_eval_sandbox.interception.broker import PROTOCOL_LINE, BrokerLimits
from agent_eval_sandbox.interception.decision import CaseContext
from agent_eval_sandbox.model_api import RetryPolicy

from .conftest import client_command, handlers_of, pre_tool_use, run_client, served

JIRA = {
    "match": "Any Jira interaction via MCP tools or scripts",
    "patterns": ["Bash", "mcp__atlassian__*"],
    "input_filters": ["jira", "JIRA_SERVER"],
    "env_checks": {"JIRA_SERVER": {"must_contain": ["localhost", "test"]}},
}
ASK = {"match": "Questions via AskUserQuestion", "patterns": ["AskUserQuestion"], "prompt": "Answer as the reporter."}
QUESTION = {
    "question": "What priority should this have?",
    "header": "Priority",
    "multiSelect": False,
    "options": [{"label": "High", "description": "urgent"}, {"label": "Normal", "description": "default"}],
}


def test_decisions_reach_the_client_and_the_host_logs_each_one(start_broker):
    harness = start_broker(handlers_of(JIRA, ASK, case_overrides={QUESTION["question"]: "Normal"}),
                           env={"JIRA_SERVER": "https://jira.example.com"})

    passed = run_client(harness.socket, pre_tool_use("Bash", {"command": "ls -la"}, "toolu_a"))
    assert (passed.returncode, passed.stdout, passed.stderr) == (0, "", "")

    denied = run_client(harness.socket, pre_tool_use("Bash", {"command": "jira issue create -s x"}, "toolu_b"))
    assert denied.returncode == 2 and denied.permission == "deny"
    reason = "Env JIRA_SERVER='https://jira.example.com' doesn't match required: ['localhost', 'test']"
    assert denied.output["hookSpecificOutput"]["permissionDecisionReason"] == reason
    assert denied.stderr.strip() == reason

    answered = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}, "toolu_c"))
    assert answered.returncode == 0 and answered.permission == "allow"
    assert answered.output["hookSpecificOutput"]["updatedInput"] == {
        "questions": [QUESTION],
        "answers": {QUESTION["question"]: "Normal"},
    }

    records = harness.records()
    assert [(r["tool_use_id"], r["decision"]) for r in records] == [
        ("toolu_a", "pass"), ("toolu_b", "deny"), ("toolu_c", "allow"),
    ]
    jira = records[1]
    assert jira["tool_name"] == "Bash" and jira["tool_input"] == {"command": "jira issue create -s x"}
    assert jira["reason"] == reason and jira["handler"] == {"index": 0, "match": JIRA["match"]}
    question = records[2]
    assert question["answers"] == {QUESTION["question"]: "Normal"}
    assert question["answer_details"][0]["tier"] == "override"
    assert question["case_id"] == "case-1" and question["time"].endswith("+00:00")
    # The log lives on the host, beside the case's other records.
    assert harness.broker.log_path.parts[-3:] == ("cases", "case-1", "tool_decisions.jsonl")


def test_the_misconfigured_bash_warning_goes_to_the_controller_once(start_broker):
    harness = start_broker(handlers_of({"match": "Jira scripts", "patterns": ["Bash"]}))
    for n in range(3):
        assert run_client(harness.socket, pre_tool_use("Bash", {"command": "jira x"}, f"t{n}")).returncode == 0
    assert len(harness.warnings) == 1
    assert "case case-1: tool_handlers.yaml: handler 'Jira scripts' has 'Bash' in patterns but no input_filters" in harness.warnings[0]
    assert all(r["decision"] == "pass" and r["warnings"] for r in harness.records())


def test_a_question_asked_by_both_hooks_is_answered_and_logged_once(start_broker, write_script):
    script = write_script({"advance": "per_request", "steps": [{"text": "High"}, {"text": "Normal"}]})
    with ScriptedModelServer(script) as model:
        harness = start_broker(handlers_of(ASK), answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}))
        gate = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}, "toolu_q"))
        # The answering hook sees the input with the gate's answers already in it.
        second_input = gate.output["hookSpecificOutput"]["updatedInput"]
        answer = run_client(harness.socket, pre_tool_use("AskUserQuestion", second_input, "toolu_q"))
        assert len(served(model, 1)) == 1
    assert gate.output == answer.output
    assert gate.output["hookSpecificOutput"]["updatedInput"]["answers"] == {QUESTION["question"]: "High"}
    assert len(harness.records()) == 1


def test_tier_2_asks_the_hook_model_through_the_sdk(start_broker, write_script):
    script = write_script([{"text": " normal\n"}])
    case = CaseContext((("input.yaml", "title: Fix the login bug\n"), ("answers.yaml", "priority: pick Normal\n")))
    with ScriptedModelServer(script) as model:
        harness = start_broker(
            handlers_of(ASK, hook_model="claude-haiku-4-5-20251001"),
            case=case,
            answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}),
        )
        result = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}))
        (request,) = served(model, 1)
    assert result.output["hookSpecificOutput"]["updatedInput"]["answers"] == {QUESTION["question"]: "Normal"}
    body = request.body
    assert body["model"] == "claude-haiku-4-5-20251001" and body["temperature"] == 0 and body["max_tokens"] == 256
    prompt = body["messages"][0]["content"]
    for expected in ("Answer as the reporter.", "--- answers.yaml ---\npriority: pick Normal", QUESTION["question"],
                     "1. High: urgent", "2. Normal: default", "Reply with ONLY the option label"):
        assert expected in prompt
    details = harness.records()[0]["answer_details"][0]
    assert (details["tier"], details["match"], details["model"]) == ("llm", "fuzzy", "claude-haiku-4-5-20251001")


def test_tier_2_retries_a_transient_error_then_answers(start_broker, write_script):
    script = write_script({"advance": "per_request", "steps": [{"error": {"status": 529}}, {"text": "High"}]})
    with ScriptedModelServer(script) as model:
        answerer = AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"},
                                     retry=RetryPolicy(attempts=3, initial_wait_s=0.05))
        harness = start_broker(handlers_of(ASK), answerer=answerer)
        result = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}))
        assert len(served(model, 2)) == 2
    assert result.output["hookSpecificOutput"]["updatedInput"]["answers"][QUESTION["question"]] == "High"


def test_a_hook_model_that_keeps_failing_falls_back_and_says_why(start_broker, write_script):
    script = write_script([{"error": {"status": 400, "message": "no such model"}}])
    with ScriptedModelServer(script) as model:
        harness = start_broker(handlers_of(ASK), answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}))
        result = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}))
    assert result.output["hookSpecificOutput"]["updatedInput"]["answers"][QUESTION["question"]] == "High"
    details = harness.records()[0]["answer_details"][0]
    assert details["tier"] == "fallback" and "BadRequestError" in details["error"] and "no such model" in details["error"]
    assert any("AskUserQuestion fallback" in w for w in harness.warnings)


def test_a_slow_hook_model_is_cut_off_by_the_answer_budget(start_broker, write_script):
    script = write_script([{"text": "Normal", "delay_s": 10}])
    with ScriptedModelServer(script) as model:
        harness = start_broker(
            handlers_of(ASK),
            answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}, retry=RetryPolicy(attempts=1)),
            limits=BrokerLimits(answer_budget_s=2.0),
        )
        result = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION, {**QUESTION, "question": "Again?"}]}))
    assert result.elapsed_s < 8
    details = harness.records()[0]["answer_details"]
    assert [d["tier"] for d in details] == ["fallback", "fallback"]
    assert "Timeout" in details[0]["error"] and "answer budget" in details[1]["error"]


def test_the_case_cap_on_hook_model_calls(start_broker, write_script):
    script = write_script({"advance": "per_request", "steps": [{"text": "Normal"}] * 5})
    with ScriptedModelServer(script) as model:
        harness = start_broker(
            handlers_of(ASK),
            answerer=AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"}),
            limits=BrokerLimits(max_llm_calls=1),
        )
        for n in range(2):
            run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}, f"toolu_{n}"))
        assert len(served(model, 1)) == 1
    tiers = [r["answer_details"][0] for r in harness.records()]
    assert tiers[0]["tier"] == "llm" and tiers[1]["tier"] == "fallback" and "cap of 1" in tiers[1]["error"]


# --- what the broker refuses -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdin", "problem"),
    [
        (b"garbage", "the hook input is not JSON"),
        (b'["Bash"]', "not a JSON object"),
        (b'{"tool_input": {}}', "no tool_name"),
        (b"\xff\xfe", "the hook input is not JSON"),
    ],
)
def test_a_malformed_event_is_denied_and_logged(start_broker, stdin, problem):
    harness = start_broker(handlers_of(JIRA))
    result = run_client(harness.socket, stdin)
    assert result.returncode == 2 and result.permission == "deny"
    assert problem in result.output["hookSpecificOutput"]["permissionDecisionReason"]
    (record,) = harness.records()
    assert record["decision"] == "deny" and problem in record["error"] and record["request_bytes"] == len(stdin)


def raw_request(socket_path: Path, data: bytes, *, half_close: bool = True) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(socket_path))
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        return json.loads(sock.makefile("rb").read())


def test_a_request_without_the_protocol_line_is_denied(start_broker):
    harness = start_broker(handlers_of(JIRA))
    reply = raw_request(harness.socket, json.dumps(pre_tool_use("Bash", {"command": "ls"})).encode())
    assert reply["decision"] == "deny" and "protocol line is missing" in reply["reason"]
    assert harness.records()[0]["error"] == reply["reason"]


def test_an_oversized_request_is_denied(start_broker):
    harness = start_broker(handlers_of(JIRA), limits=BrokerLimits(max_request_bytes=1000))
    big = json.dumps(pre_tool_use("Write", {"file_path": "x", "content": "y" * 5000})).encode()
    result = run_client(harness.socket, big)
    assert result.permission == "deny"
    assert "larger than 1000 bytes" in harness.records()[0]["reason"]


def test_a_request_that_never_finishes_is_cut_off(start_broker):
    harness = start_broker(handlers_of(JIRA), limits=BrokerLimits(read_timeout_s=0.5))
    started = time.monotonic()
    reply = raw_request(harness.socket, PROTOCOL_LINE + b'{"tool_name": "Ba', half_close=False)
    assert time.monotonic() - started < 5
    assert reply["decision"] == "deny" and "did not arrive within 0.5 s" in reply["reason"]


def test_connections_beyond_the_limit_are_closed_at_once_and_the_client_denies(start_broker):
    harness = start_broker(handlers_of(JIRA), limits=BrokerLimits(max_connections=1, read_timeout_s=5))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hog:
        hog.connect(str(harness.socket))  # holds the only slot while the broker waits for its request
        time.sleep(0.2)
        started = time.monotonic()
        result = run_client(harness.socket, pre_tool_use("Bash", {"command": "ls"}))
        assert time.monotonic() - started < 4  # not held until the hog's read timeout
    # The broker's own deny, or the client's if the broker closed before it read the answer: a deny.
    assert result.returncode == 2 and result.permission == "deny"
    assert harness.broker.connections_refused == 1
    record = harness.records()[0]
    assert record["decision"] == "deny" and "1 are open already (cap 1)" in record["reason"]


def test_a_connection_flood_gets_no_threads_and_a_bounded_log(start_broker):
    harness = start_broker(handlers_of(JIRA), limits=BrokerLimits(max_connections=4, read_timeout_s=30))
    threads_before = threading.active_count()
    hogs = []
    for _ in range(300):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(harness.socket))
        hogs.append(sock)
    deadline = time.monotonic() + 10
    while harness.broker.connections_refused < 296 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert harness.broker.connections_refused == 296
    assert threading.active_count() - threads_before <= 4 + 1
    for sock in hogs:
        sock.close()
    time.sleep(0.3)
    assert run_client(harness.socket, pre_tool_use("Bash", {"command": "ls"})).returncode == 0  # served again
    harness.broker.close()
    refusals = [r for r in harness.records() if r["error"] and "connection" in r["error"]]
    assert len(refusals) == 11 and "296 connections in all" in refusals[-1]["error"]
    # The 4 it served waited for a request that never came: each a logged deny of its own.
    assert sum("protocol line is missing" in (r["error"] or "") for r in harness.records()) == 4


def test_concurrent_requests_are_all_decided(start_broker):
    harness = start_broker(handlers_of(JIRA), env={"JIRA_SERVER": "http://localhost:2990"})
    results: list = [None] * 12

    def call(n: int) -> None:
        results[n] = run_client(harness.socket, pre_tool_use("Bash", {"command": f"jira issue view J-{n}"}, f"t{n}"))

    threads = [threading.Thread(target=call, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.returncode == 0 and r.stdout == "" for r in results)
    assert sorted(r["tool_use_id"] for r in harness.records()) == sorted(f"t{n}" for n in range(12))
    assert {r["decision"] for r in harness.records()} == {"allow"}


def test_a_closed_broker_removes_its_socket(start_broker):
    harness = start_broker(handlers_of(JIRA))
    harness.broker.close()
    assert not harness.socket.exists()
    result = run_client(harness.socket, pre_tool_use("Bash", {"command": "ls"}))
    assert result.returncode == 2 and "not reachable" in result.stderr


# --- the client fails closed ------------------------------------------------------------------


def assert_fail_closed(result, fragment: str) -> None:
    assert result.returncode == 2, result
    output = result.output["hookSpecificOutput"]
    assert output["hookEventName"] == "PreToolUse" and output["permissionDecision"] == "deny"
    assert fragment in output["permissionDecisionReason"], output
    assert "(fail closed)" in output["permissionDecisionReason"]
    assert result.stderr.strip() == output["permissionDecisionReason"]


def test_no_broker_at_all(sock_dir):
    assert_fail_closed(run_client(sock_dir / "missing.sock", pre_tool_use("Read", {})), "broker is not reachable")


def test_a_socket_nobody_listens_on(sock_dir):
    path = sock_dir / "dead.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nothing accepts
    assert_fail_closed(run_client(path, pre_tool_use("Read", {})), "Connection refused")


@contextmanager
def fake_broker(path: Path, answer: bytes | None) -> Iterator[None]:
    """A server on the broker's socket that answers `answer` (or hangs when None)."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.makefile("rb").read()
            if answer is None:
                time.sleep(30)
            else:
                self.request.sendall(answer)

    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (b"garbage", "not JSON"),
        (b"", "not JSON"),
        (json.dumps({"decision": "deny", "hook_output": None}).encode(), "denied without a hook output"),
        (json.dumps({"decision": "allow", "hook_output": {"hookSpecificOutput": {"permissionDecision": "deny"}}}).encode(),
         "does not match its decision"),
        (b'{"decision": "yes please"}', "has no decision"),
    ],
)
def test_a_broker_answering_garbage(sock_dir, answer, fragment):
    path = sock_dir / "fake.sock"
    with fake_broker(path, answer):
        result = run_client(path, pre_tool_use("Bash", {"command": "ls"}))
    assert_fail_closed(result, fragment)


def test_a_broker_that_never_answers(sock_dir):
    path = sock_dir / "slow.sock"
    with fake_broker(path, None):
        result = run_client(path, pre_tool_use("Bash", {"command": "ls"}), timeout=1)
    assert result.elapsed_s < 5
    assert_fail_closed(result, "signal 14")  # SIGALRM: the client's own deadline


BROKER_PROCESS = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from agent_eval_sandbox.interception.broker import Broker
    from agent_eval_sandbox.interception.decision import CaseContext
    from agent_eval_sandbox.interception.handlers import parse_handlers

    handlers = parse_handlers({"handlers": [{"match": "q", "patterns": ["AskUserQuestion"]}]}, "t")

    def slow_model(request, timeout):
        time.sleep(60)
        return "x"

    Broker("c", Path(sys.argv[1]), handlers, CaseContext(), {}, Path(sys.argv[2]), answerer=slow_model).start()
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_a_broker_killed_mid_request(sock_dir, tmp_path):
    path = sock_dir / "broker.sock"
    broker = subprocess.Popen([sys.executable, "-c", BROKER_PROCESS, str(path), str(tmp_path / "log.jsonl")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None and broker.stdout.readline().strip() == "ready"
        client = subprocess.Popen(client_command(path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert client.stdin is not None
        client.stdin.write(json.dumps(pre_tool_use("AskUserQuestion", {"questions": [QUESTION]})).encode())
        client.stdin.close()
        client.stdin = None  # communicate() must not flush it again
        time.sleep(0.5)  # the broker is now asking its (slow) hook model
        broker.kill()
        stdout, stderr = client.communicate(timeout=10)
    finally:
        broker.kill()
        broker.wait(timeout=10)
        if broker.stdout is not None:
            broker.stdout.close()
    assert client.returncode == 2
    assert json.loads(stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert b"fail closed" in stderr


def test_a_client_stopped_by_a_signal_denies(sock_dir):
    path = sock_dir / "slow.sock"
    with fake_broker(path, None):
        client = subprocess.Popen(client_command(path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert client.stdin is not None
        client.stdin.write(b'{"tool_name": "Bash", "tool_input": {}}')
        client.stdin.close()
        client.stdin = None  # communicate() must not flush it again
        time.sleep(0.5)
        os.kill(client.pid, signal.SIGTERM)
        stdout, _ = client.communicate(timeout=10)
    assert client.returncode == 2
    output = json.loads(stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny" and "interrupted by signal 15" in output["permissionDecisionReason"]


def test_the_client_is_fast(start_broker):
    harness = start_broker(handlers_of(JIRA))
    elapsed = sorted(run_client(harness.socket, pre_tool_use("Read", {"file_path": "x"}, f"t{n}")).elapsed_s for n in range(5))
    # It runs before every tool call: interpreter start + one round trip (median, on a noisy 2-vCPU VM).
    assert elapsed[2] < 0.5, elapsed


# --- what a forged question can cost -----------------------------------------------------------


@pytest.fixture
def case_channel(sock_dir, tmp_path):
    """The case's gateway channel, which pays for the hook model's calls."""
    gateways: list[ModelGateway] = []

    def open_channel(budget: float) -> Channel:
        gateway = ModelGateway("http://127.0.0.1:9", Credentials(api_key="sk-host-test-key"))
        gateways.append(gateway)
        return gateway.open_channel("case-1", sock_dir / "gateway.sock", budget, tmp_path / "gateway.jsonl")

    yield open_channel
    for gateway in gateways:
        gateway.close()


def _gateway_log(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "gateway.jsonl").read_text().splitlines()]


def test_hook_model_calls_are_paid_from_the_cases_budget(start_broker, write_script, case_channel, tmp_path):
    script = write_script({"advance": "per_request",
                           "steps": [{"text": "Normal", "usage": {"input_tokens": 200, "output_tokens": 5}}] * 3})
    channel = case_channel(1.0)
    with ScriptedModelServer(script) as model:
        answerer = AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"})
        harness = start_broker(handlers_of(ASK, hook_model="claude-haiku-4-5"),
                               answerer=MeteredAnswerer(answerer, channel))
        for n in range(3):
            result = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}, f"q{n}"))
            assert result.output["hookSpecificOutput"]["updatedInput"]["answers"][QUESTION["question"]] == "Normal"
    channel.close()
    # haiku 4.5: 200 in (the ~700-byte prompt) at $1 + 5 out at $5 per MTok, three times.
    assert channel.spent_usd == pytest.approx(3 * 0.000225) and channel.ledger.reserved_usd == 0
    calls = [r for r in _gateway_log(tmp_path) if r["outcome"] == "hook_model"]
    assert [r["cost_usd"] for r in calls] == [pytest.approx(0.000225)] * 3
    assert all(0 < r["cost_usd"] <= r["reserved_usd"] for r in calls)


def test_a_budget_that_cannot_cover_the_hook_model_falls_back_without_a_call(start_broker, write_script,
                                                                           case_channel, tmp_path):
    script = write_script([{"text": "Normal"}])
    channel = case_channel(0.0001)  # less than one call's worst case (~$0.0018 for haiku)
    with ScriptedModelServer(script) as model:
        answerer = AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"})
        harness = start_broker(handlers_of(ASK, hook_model="claude-haiku-4-5"),
                               answerer=MeteredAnswerer(answerer, channel))
        result = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}))
        assert model.requests == []
    channel.close()
    assert result.output["hookSpecificOutput"]["updatedInput"]["answers"][QUESTION["question"]] == "High"
    details = harness.records()[0]["answer_details"][0]
    assert details["tier"] == "fallback" and "BudgetExhausted" in details["error"]
    assert channel.spent_usd == 0


def test_forged_questions_are_capped_and_the_hook_model_asked_at_most_twenty_times(start_broker, write_script,
                                                                                    case_channel, tmp_path):
    script = write_script({"advance": "per_request", "steps": [{"text": "Normal"}] * 40})
    channel = case_channel(10.0)
    huge = {**QUESTION, "question": "Q" * 600_000}
    with ScriptedModelServer(script) as model:
        answerer = AnthropicAnswerer({"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "k"})
        harness = start_broker(handlers_of(ASK), answerer=MeteredAnswerer(answerer, channel))
        too_big = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [huge]}, "big"))
        too_many = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION] * 9}, "many"))
        long_text = {**QUESTION, "question": "Why? " * 1000}  # 5,000 characters: answered, not sent to the model
        not_sent = run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [long_text]}, "long"))
        for n in range(25):
            run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [QUESTION]}, f"forged-{n}"))
        served_count = len(served(model, 20))
    channel.close()
    assert too_big.permission == "deny" and "characters of questions" in too_big.stderr
    assert too_many.permission == "deny" and "9 questions; at most 8" in too_many.stderr
    assert not_sent.permission == "allow"
    records = harness.records()
    assert "not asked: the question has 5000 characters" in records[2]["answer_details"][0]["error"]
    assert served_count == 20
    tiers = [r["answer_details"][0]["tier"] for r in records[3:]]
    assert tiers.count("llm") == 20 and tiers.count("fallback") == 5
    assert len([r for r in _gateway_log(tmp_path) if r["outcome"] == "hook_model"]) == 20
    # The forged 600,000-character question left a bounded line in the decision log.
    big_line = harness.broker.log_path.read_text().splitlines()[0]
    assert len(big_line) < 64 * 1024 and "[truncated: 600000 chars]" in big_line


def test_a_huge_event_leaves_a_truncated_record(start_broker):
    harness = start_broker(handlers_of(JIRA))
    content = "z" * (12 * 1024 * 1024)
    result = run_client(harness.socket, pre_tool_use("Write", {"file_path": "/workspace/big", "content": content}))
    assert result.returncode == 0  # no handler for Write: pass, as before
    harness.broker.close()
    (line,) = harness.broker.log_path.read_text().splitlines()
    record = json.loads(line)
    assert len(line) < 16 * 1024 and record["tool_input"]["file_path"] == "/workspace/big"
    assert record["tool_input"]["content"].endswith(f"…[truncated: {len(content)} chars]")


def test_forged_events_print_a_bounded_number_of_warnings(start_broker):
    harness = start_broker(handlers_of(ASK))  # no hook model: every question lands on the fallback, with a warning
    for n in range(30):
        question = {**QUESTION, "question": f"Forged question {n}?"}
        run_client(harness.socket, pre_tool_use("AskUserQuestion", {"questions": [question]}, f"toolu_w{n}"))
    assert len(harness.warnings) == 21 and "more than 20 hook warnings" in harness.warnings[-1]
    assert len(harness.records()) == 30


def test_a_case_sending_costly_hook_requests_gets_only_its_share_of_the_controllers_cpu(start_broker):
    """As with the gateway (a red team's flood there): what the host spends reading, parsing and
    logging a case's hook requests is the case's share of the controller's CPU."""
    harness = start_broker(handlers_of(JIRA))
    share = harness.broker.cpu_share = CpuShare(rate=0.25, burst_s=0.2)
    costly = PROTOCOL_LINE + json.dumps(pre_tool_use("Bash", {"command": "ls", "x": [{"a": 0}] * 600_000})).encode()
    started = time.monotonic()
    replies = [raw_request(harness.socket, costly) for _ in range(6)]
    wall = time.monotonic() - started
    assert all("decision" in reply for reply in replies), replies
    each = share.charged_s / 6
    assert each > 0.05, each
    assert share.charged_s <= share.burst_s + share.rate * wall + 2 * each, (share.charged_s, wall)
    assert share.waited_s > 0
