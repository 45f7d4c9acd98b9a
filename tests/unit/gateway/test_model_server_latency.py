"""The scripted model server answers a kept-alive connection without Nagle's delay.

An answer goes out as several small writes (headers, then each chunk); with
Nagle's algorithm on, each later write waits for the client's delayed ACK —
about 40 ms a request, which every offline case paid per model request until
the server set TCP_NODELAY (and a merge once silently dropped it).
"""

from __future__ import annotations

import statistics
import time

import httpx

from agent_eval_sandbox.gateway import ScriptedModelServer
from agent_eval_sandbox.gateway.script import parse_script

REQUESTS = 15
# Linux's delayed ACK is at least 40 ms: a median under this is no Nagle wait, even on a loaded machine.
NO_NAGLE_WAIT_S = 0.025


def test_streamed_answers_on_a_kept_alive_connection_do_not_wait_for_a_delayed_ack():
    steps = [{"text": "ok"}] * (REQUESTS + 1)
    body = {"model": "claude-sonnet-4-6", "max_tokens": 16, "stream": True,
            "messages": [{"role": "user", "content": "hi " * 2000}]}
    with ScriptedModelServer(parse_script({"advance": "per_request", "steps": steps})) as server, \
            httpx.Client(base_url=server.url, timeout=10) as client:
        client.post("/v1/messages", json=body).raise_for_status()  # the connection, kept alive from here on
        took = []
        for _ in range(REQUESTS):
            started = time.perf_counter()
            with client.stream("POST", "/v1/messages", json=body) as answer:
                answer.raise_for_status()
                answer.read()
            took.append(time.perf_counter() - started)
    assert statistics.median(took) < NO_NAGLE_WAIT_S, [round(t * 1000, 1) for t in took]
