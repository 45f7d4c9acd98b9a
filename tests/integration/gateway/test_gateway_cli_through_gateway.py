"""(b, c) The real CLI -> forwarder.py (TCP) -> gateway (unix socket) -> scripted server."""

from __future__ import annotations

import os
import stat
import uuid

import pytest

from agent_eval_sandbox.gateway import (
    BUDGET_REFUSAL_STATUS,
    Channel,
    Credentials,
    ModelGateway,
    ScriptedModelServer,
)
from agent_eval_sandbox.gateway.policy import GatewayPolicy, ModelAllowlist


@pytest.fixture
def secret() -> str:
    return f"sk-test-SECRET-{uuid.uuid4().hex}"


def test_the_gateway_injects_the_key_that_the_cli_never_sees(
    run_claude, write_script, start_forwarder, read_log, tmp_path, secret
):
    script = write_script(
        [
            {"tool": "Bash", "input": {"command": "env > env.txt; cat /proc/self/environ > proc-env.bin"}},
            {"text": "Looked around."},
        ]
    )
    sockets = tmp_path / "sock"
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=secret)) as gateway:
        channel = gateway.open_channel("case-1", sockets / "gateway.sock", 5.0, tmp_path / "gateway.jsonl")
        assert stat.S_ISSOCK(os.lstat(channel.socket_path).st_mode)
        run = run_claude(start_forwarder(channel.socket_path))
        channel.close()
        assert not channel.socket_path.exists()

    assert run.returncode == 0, run.stderr
    assert run.result["result"] == "Looked around."
    # The upstream got the host's key, injected by the gateway; the CLI only had the placeholder.
    assert [r.headers["x-api-key"] for r in upstream.requests] == [secret, secret]
    assert all("authorization" not in {k.lower() for k in r.headers} for r in upstream.requests)
    assert secret not in " ".join(run.env.values())
    assert "ANTHROPIC_API_KEY=placeholder" in (run.cwd / "env.txt").read_text()
    assert secret.encode() not in (run.cwd / "proc-env.bin").read_bytes()
    assert secret not in (run.cwd / "env.txt").read_text()

    log_text = (tmp_path / "gateway.jsonl").read_text()
    assert "SECRET" not in log_text
    records = read_log(tmp_path / "gateway.jsonl")
    assert [(r["method"], r["status"], r["outcome"]) for r in records] == [("POST", 200, "forwarded")] * 2
    assert all(r["request_headers"]["x-api-key"] == "[redacted]" for r in records)
    assert records[0]["response"]["message"]["content"][0]["name"] == "Bash"
    assert records[0]["request"]["model"] == "claude-sonnet-4-5"
    assert records[1]["spent_usd"] == pytest.approx(channel.spent_usd)
    # The gateway's bill agrees with the CLI's own.
    assert channel.spent_usd == pytest.approx(run.result["total_cost_usd"])
    assert channel.requests == 2 and channel.refused == 0


def test_over_budget_the_next_request_is_refused_and_the_cli_stops_promptly(
    run_claude, write_script, start_forwarder, read_log, tmp_path, secret
):
    script = write_script(
        [
            # The CLI's ~88 KB request reserves ~$0.175 of input (29k tokens at most, at the
            # $6 cache-write rate) and at least 1,024 output tokens: a $0.25 budget admits it.
            # It costs 29k in + 100 out at sonnet prices = $0.0885; what is left ($0.16) cannot
            # cover the next request's reservation.
            {
                "tool": "Bash",
                "input": {"command": "echo one > one.txt"},
                "usage": {"input_tokens": 29000, "output_tokens": 100},
            },
            {"tool": "Bash", "input": {"command": "echo two > two.txt"}},
            {"text": "never reached"},
        ]
    )
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=secret)) as gateway:
        channel = gateway.open_channel("case-2", tmp_path / "s" / "gateway.sock", 0.25, tmp_path / "gateway.jsonl")
        run = run_claude(start_forwarder(channel.socket_path), timeout=60)
        channel.close()

    assert run.elapsed_s < 15, f"the CLI took {run.elapsed_s:.1f}s to give up"
    assert run.returncode != 0
    assert run.result["is_error"] is True
    assert run.result["api_error_status"] == BUDGET_REFUSAL_STATUS
    assert "budget exhausted" in run.result["result"]
    assert (run.cwd / "one.txt").exists() and not (run.cwd / "two.txt").exists()
    assert len(upstream.requests) == 1
    records = read_log(tmp_path / "gateway.jsonl")
    assert [(r["outcome"], r["refused"]) for r in records] == [("forwarded", False), ("over_budget", True)]
    assert records[1]["status"] == 402 and records[1]["spent_usd"] == pytest.approx(0.0885)
    # The first request's max_tokens (32,000) was lowered to what the budget could cover.
    assert records[0]["max_tokens_lowered_from"] == 32000 and records[0]["request"]["max_tokens"] < 32000
    assert records[0]["reserved_usd"] <= 0.25
    assert channel.refused == 1 and channel.spent_usd == pytest.approx(0.0885)


def test_a_zero_budget_allows_no_request(run_claude, write_script, start_forwarder, read_log, tmp_path, secret):
    script = write_script([{"text": "unreachable"}])
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=secret)) as gateway:
        channel = gateway.open_channel("case-3", tmp_path / "s" / "gateway.sock", 0, tmp_path / "gateway.jsonl")
        run = run_claude(start_forwarder(channel.socket_path), timeout=60)
        channel.close()
    assert run.elapsed_s < 15
    assert run.result["api_error_status"] == 402
    assert upstream.requests == []
    assert [r["outcome"] for r in read_log(tmp_path / "gateway.jsonl")] == ["over_budget"]


def test_the_cli_works_under_the_policy_and_survives_the_idle_timeout(
    run_claude, write_script, start_forwarder, read_log, tmp_path, secret
):
    """Its own model allowed, its betas passed, and a keep-alive connection the gateway closed
    while a tool ran (idle timeout 1 s, the tool 3 s) is replaced without a failed request."""
    script = write_script([{"tool": "Bash", "input": {"command": "sleep 3; echo slept > slept.txt"}},
                           {"text": "Rested."}])
    policy = GatewayPolicy(models=ModelAllowlist.of(["claude-sonnet-4-5", "claude-haiku-4-5"]))
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=secret),
                                                               policy=policy) as gateway:
        channel = Channel("case-5", tmp_path / "s" / "gateway.sock", 5.0, tmp_path / "gateway.jsonl",
                          upstream_url=upstream.url, credentials=gateway.credentials, client=gateway._client,
                          policy=policy, idle_timeout_s=1.0).start()
        run = run_claude(start_forwarder(channel.socket_path))
        channel.close()
    assert run.returncode == 0, run.stderr
    assert run.result["result"] == "Rested." and (run.cwd / "slept.txt").exists()
    records = read_log(tmp_path / "gateway.jsonl")
    assert [r["outcome"] for r in records] == ["forwarded", "forwarded"]
    assert not any(r["betas_dropped"] for r in records)
    assert "claude-code-20250219" in upstream.requests[0].headers["anthropic-beta"]


def test_a_model_the_eval_does_not_allow_ends_the_cli_with_the_reason(
    run_claude, write_script, start_forwarder, read_log, tmp_path, secret
):
    script = write_script([{"text": "unreachable"}])
    policy = GatewayPolicy(models=ModelAllowlist.of(["claude-opus-4-6"]))
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=secret),
                                                               policy=policy) as gateway:
        channel = gateway.open_channel("case-6", tmp_path / "s" / "gateway.sock", 5.0, tmp_path / "gateway.jsonl")
        run = run_claude(start_forwarder(channel.socket_path), timeout=60)
        channel.close()
    # Measured: a 400 is tried a few times at once, then the CLI ends with the gateway's message.
    assert run.elapsed_s < 30 and run.returncode != 0
    assert run.result["is_error"] is True
    assert "model 'claude-sonnet-4-5' is not allowed" in run.result["result"]
    assert upstream.requests == []
    records = read_log(tmp_path / "gateway.jsonl")
    assert records and {r["outcome"] for r in records} == {"policy_refused"} and len(records) <= 10
