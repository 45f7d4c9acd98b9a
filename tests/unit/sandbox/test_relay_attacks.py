"""The Kubernetes transport attacked: the relay in front of the real gateway channels and hook brokers.

A Pod reaches its case's gateway and broker only through the controller's
relay, with the token the controller put in its read-only relay.json. The
clients here are the in-Pod code itself (`inside/controller_link.py`, the
real `hook_client.py`), given a relay.json as a Pod would have it.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import agent_eval_sandbox.inside.hook_client as hook_client_module
from agent_eval_sandbox.gateway import Credentials, ModelGateway, ScriptedModelServer, parse_script
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.inside import controller_link, paths
from agent_eval_sandbox.interception import Broker, CaseContext
from agent_eval_sandbox.interception.handlers import parse_handlers
from agent_eval_sandbox.sandbox.relay import Relay

SECRET = "sk-ant-host-SECRET-never-in-a-pod"
HOOK_CLIENT = Path(hook_client_module.__file__)
BODY = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Case:
    id: str
    channel_dir: Path
    channel: Channel
    broker: Broker
    token: str

    @property
    def gateway_log(self) -> list[dict]:
        path = self.channel.log_path
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    @property
    def decisions(self) -> list[dict]:
        path = self.broker.log_path
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def sock_root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="aes-rl-", dir="/tmp"))  # unix socket paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def world(sock_root: Path) -> Iterator[tuple[Relay, ScriptedModelServer, dict[str, Case]]]:
    script = parse_script([{"text": "answer"}] * 10, source="test")
    handlers = parse_handlers({"handlers": [{"match": "q", "patterns": ["AskUserQuestion"]}]}, "t")
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=SECRET)) as gateway, \
            Relay("127.0.0.1", 0) as relay:
        cases: dict[str, Case] = {}
        for case_id in ("a", "b"):
            channel_dir = sock_root / case_id
            channel_dir.mkdir()
            channel = gateway.open_channel(case_id, channel_dir / paths.GATEWAY_SOCKET_NAME, 1.0,
                                           sock_root / f"{case_id}-gateway.jsonl")
            broker = Broker(case_id, channel_dir / paths.BROKER_SOCKET_NAME, handlers, CaseContext(), {},
                            sock_root / f"{case_id}-decisions.jsonl", answerer=None).start()
            cases[case_id] = Case(case_id, channel_dir, channel, broker, relay.register(channel_dir, case_id))
        try:
            yield relay, upstream, cases
        finally:
            for case in cases.values():
                case.broker.close()
                case.channel.close()


def pod_dir(root: Path, relay: Relay, token: str) -> Path:
    """/run/agent-eval as a Pod has it: no sockets, a relay.json."""
    path = root / f"pod-{token[:6]}"
    path.mkdir(exist_ok=True)
    (path / controller_link.RELAY_FILE_NAME).write_text(
        json.dumps({"host": "127.0.0.1", "port": relay.port, "token": token}))
    return path


def post(sock: socket.socket, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("pod")
    conn.sock = sock
    conn.request("POST", "/v1/messages", body=json.dumps(BODY),
                 headers={"content-type": "application/json", "anthropic-version": "2023-06-01", **(headers or {})})
    response = conn.getresponse()
    return response.status, response.read()


def ask_hook(pod: Path, event: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", str(HOOK_CLIENT), "--socket", str(pod / paths.BROKER_SOCKET_NAME),
                           "--timeout", "20"], input=json.dumps(event), capture_output=True, text=True, timeout=60)


BASH_EVENT = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
              "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"}


def test_a_token_reaches_its_own_case_only(world, sock_root):
    relay, upstream, cases = world
    a, b = cases["a"], cases["b"]
    sock = controller_link.connect(str(pod_dir(sock_root, relay, a.token) / paths.GATEWAY_SOCKET_NAME), 10)
    with sock:
        status, _ = post(sock)
    assert status == 200
    assert [r["case_id"] for r in a.gateway_log] == ["a"] and b.gateway_log == []
    assert a.channel.spent_usd > 0 and b.channel.spent_usd == 0
    hook = ask_hook(pod_dir(sock_root, relay, a.token), BASH_EVENT)
    assert hook.returncode == 0, hook.stderr
    assert [d["tool_name"] for d in a.decisions] == ["Bash"] and b.decisions == []
    assert relay.refusals == 0


@pytest.mark.parametrize("forged", ["guess", "flip", "other-run"])
def test_a_forged_token_is_refused_and_logged(world, sock_root, forged):
    relay, upstream, cases = world
    a = cases["a"]
    token = {"guess": "A" * 43, "flip": a.token[:-1] + ("A" if a.token[-1] != "A" else "B"),
             "other-run": Relay("127.0.0.1", 0).register(a.channel_dir, "a")}[forged]
    pod = pod_dir(sock_root, relay, token)
    with pytest.raises(controller_link.LinkError, match="refused unknown or expired token"):
        controller_link.connect(str(pod / paths.GATEWAY_SOCKET_NAME), 10)
    hook = ask_hook(pod, BASH_EVENT)
    assert hook.returncode == 2 and "refused" in json.loads(hook.stdout)["hookSpecificOutput"][
        "permissionDecisionReason"]
    assert relay.refusals == 2 and all("unknown or expired token" in line for line in relay.refusal_log)
    assert a.gateway_log == [] and a.decisions == [] and upstream.requests == []


def test_no_token_no_preamble_and_junk_are_refused(world):
    relay, upstream, cases = world
    for payload in (b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n\r\n", b"agent-eval-relay/1 \n",
                    b"agent-eval-relay/1 tok ../../etc/passwd\n", b"x" * 1000):
        with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as sock:
            sock.sendall(payload)
            answer = sock.recv(200)
        assert answer.startswith(b"refused"), payload
    assert relay.refusals == 4
    assert all(c.gateway_log == [] for c in cases.values()) and upstream.requests == []


def test_a_stale_token_is_worthless_once_its_case_ended(world, sock_root):
    relay, upstream, cases = world
    a = cases["a"]
    pod = pod_dir(sock_root, relay, a.token)
    controller_link.connect(str(pod / paths.GATEWAY_SOCKET_NAME), 10).close()
    relay.revoke(a.token)  # the case's sandbox was destroyed
    with pytest.raises(controller_link.LinkError, match="unknown or expired token"):
        controller_link.connect(str(pod / paths.GATEWAY_SOCKET_NAME), 10)
    # And a token still registered when its channel has closed reaches nothing.
    b = cases["b"]
    b.channel.close()
    with pytest.raises(controller_link.LinkError, match="not being served"):
        controller_link.connect(str(pod_dir(sock_root, relay, b.token) / paths.GATEWAY_SOCKET_NAME), 10)


def test_the_token_never_reaches_the_model_api(world, sock_root):
    relay, upstream, cases = world
    a = cases["a"]
    sock = controller_link.connect(str(pod_dir(sock_root, relay, a.token) / paths.GATEWAY_SOCKET_NAME), 10)
    with sock:
        # A Pod may also put its token where credentials go: the gateway sends the host's instead.
        status, _ = post(sock, {"x-api-key": a.token, "authorization": f"Bearer {a.token}",
                                "x-agent-eval-token": a.token})
    assert status == 200
    (request,) = upstream.requests
    assert request.headers["x-api-key"] == SECRET
    sent = json.dumps({"headers": request.headers, "body": request.body})
    assert a.token not in sent and "agent-eval-relay" not in sent
    # The relay's preamble is not part of what the gateway reads; the credential headers are redacted.
    (record,) = a.gateway_log
    assert "agent-eval-relay" not in json.dumps(record)
    assert record["request_headers"]["x-api-key"] == record["request_headers"]["authorization"] == "[redacted]"
