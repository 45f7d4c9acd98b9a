"""(b, c) The real CLI -> forwarder.py (TCP) -> gateway (unix socket) -> scripted server."""

from __future__ import annotations

import os
import stat
import uuid

import pytest

from agent_eval_sandbox.gateway import (
    BUDGET_REFUSAL_STATUS,
    Credentials,
    ModelGateway,
    ScriptedModelServer,
)


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
            # 10k in + 100 out at sonnet prices = $0.0315, over a $0.01 budget.
            {
                "tool": "Bash",
                "input": {"command": "echo one > one.txt"},
                "usage": {"input_tokens": 10000, "output_tokens": 100},
            },
            {"tool": "Bash", "input": {"command": "echo two > two.txt"}},
            {"text": "never reached"},
        ]
    )
    with ScriptedModelServer(script) as upstream, ModelGateway(upstream.url, Credentials(api_key=secret)) as gateway:
        channel = gateway.open_channel("case-2", tmp_path / "s" / "gateway.sock", 0.01, tmp_path / "gateway.jsonl")
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
    assert records[1]["status"] == 402 and records[1]["spent_usd"] == pytest.approx(0.0315)
    assert channel.refused == 1 and channel.spent_usd == pytest.approx(0.0315)


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
