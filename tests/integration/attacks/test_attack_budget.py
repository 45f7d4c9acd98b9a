"""The skill under test goes after the case's budget and the controller, through the sockets.

The untrusted skill's Bash tool talks straight to the unix sockets mounted at
/run/agent-eval: the model gateway's and the hook broker's. One eval, five
cases side by side, each with max_budget_usd 0.5:

- burst:     8 slow requests at once (admission on `spent < budget` let all 8
             through: $2.40 recorded on $0.50);
- cutoff:    a streamed answer hung up on right after message_start (charged
             $0.00036 for what costs $1.50 read to the end);
- policy:    a model the eval does not allow, server tools, mcp_servers,
             container, a URL image, an absurd max_tokens, an MCP beta;
- forge:     forged AskUserQuestion events (huge and many) and 12 MiB Write
             events on the broker's socket (200 hook-model calls nobody paid
             for; a 480 MiB tool_decisions.jsonl);
- flood:     1,500 idle connections to each socket (a thread and a descriptor
             each: the controller ran out of descriptors and the run died);
- neighbour: an ordinary case beside them.

The run is online against a scripted upstream of the test's own (the gateway
injects the test's key), so the assertions see exactly what reached the
"model API": the upstream's own record of every request, hook-model calls
included. The controller runs with the common soft limit of 1,024 descriptors,
and a sampler counts its open descriptors and threads from /proc while the
attacks run.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import parse_script

from .conftest import (
    AttackRun,
    bash,
    by_probe,
    final,
    make_project,
    record_fact,
    run_attack,
    write,
    write_eval,
)

pytestmark = pytest.mark.docker

BUDGET = 0.5
PROBE = Path(__file__).parent / "probes" / "gateway_abuse.py"
# The scripted step each kind of forged request asks for, by its number of assistant turns.
BURST_STEP, CUTOFF_STEP, POLICY_STEP = 10, 11, 12
# Every request the CLI itself makes is cheap: the attacks, not the agent, spend the budget.
CHEAP = {"input_tokens": 100, "output_tokens": 10}
CASES: dict[str, dict[str, Any]] = {
    # 8 × ~30 KB asking for 20,000 output tokens: ~$0.36 reserved each ($0.06 input bound + $0.30).
    "burst": {"mode": "burst", "n": 8, "turns": BURST_STEP, "max_tokens": 20_000, "pad": 30_000},
    "cutoff": {"mode": "cutoff", "turns": CUTOFF_STEP, "max_tokens": 10_000},
    "policy": {"mode": "policy", "turns": POLICY_STEP},
    "forge": {"mode": "forge", "huge": 200, "huge_chars": 600_000, "small": 30, "writes": 40,
              "write_bytes": 12 * 1024 * 1024},
    "flood": {"mode": "flood", "count": 1500, "hold_s": 15},
    "neighbour": {"mode": "neighbour", "sleep_s": 25},
}
CONTROLLER_NOFILE = 1024


def _upstream_steps() -> list[dict[str, Any]]:
    """Steps 0-2: the CLI's own turns (the same in every case: the probe reads its mode from
    input.yaml); 10-12: what the forged requests ask for."""
    steps: list[dict[str, Any]] = [
        {**write("/workspace/probe.py", PROBE.read_text()), "usage": CHEAP},
        {**bash("python3 /workspace/probe.py /workspace/input.yaml", 300_000), "usage": CHEAP},
        {**final("attacked"), "usage": CHEAP},
    ]
    steps += [{"text": "filler", "usage": CHEAP}] * (BURST_STEP - len(steps))
    # Honest usage: no more input than the forged body can hold (8,000 tokens for ~30 KB), and the
    # scripted server, like the API, bills no more output than the request's max_tokens.
    steps.append({"text": "slow answer", "delay_s": 3.0, "usage": {"input_tokens": 8000, "output_tokens": 20_000}})
    # ~1 MB of text: far more than the sockets buffer, so a client that hangs up cuts it short.
    steps.append({"text": "y" * 1_000_000, "usage": {"input_tokens": 300, "output_tokens": 10_000}})
    steps.append({"text": "policy ok", "usage": CHEAP})
    return steps


class ControllerSampler:
    """Samples the controller process (found by the run-id prefix in its command line):
    its open descriptors and threads, every 0.2 s, keeping the maximum."""

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode()
        self.max_fds = 0
        self.max_threads = 0
        self.samples = 0
        self.nofile: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _pids(self) -> list[str]:
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"agent_eval_sandbox" in argv and b"run" in argv and any(self.marker in arg for arg in argv):
                found.append(pid)
        return found

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pid in self._pids():
                try:
                    fds = len(os.listdir(f"/proc/{pid}/fd"))
                    status = Path(f"/proc/{pid}/status").read_text()
                    limits = Path(f"/proc/{pid}/limits").read_text()
                except OSError:
                    continue
                threads = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))
                self.max_fds, self.max_threads = max(self.max_fds, fds), max(self.max_threads, threads)
                self.samples += 1
                self.nofile = next((" ".join(line.split()[3:5]) for line in limits.splitlines()
                                    if line.startswith("Max open files")), None)

    def __enter__(self) -> ControllerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture(scope="module")
def budget_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> dict[str, Any]:
    project = make_project(tmp_path_factory, "budget", runtime)
    write_eval(project, f"""
        name: attack-budget
        execution: {{prompt: "{{q}}", timeout: 400, max_budget_usd: {BUDGET}, parallelism: {len(CASES)}}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
    """, runtime, sandbox="memory: 1g", tail="""
        inputs:
          tools:
            - match: Questions the agent asks the user.
              prompt: Answer as the reporter would.
    """)
    project.write("tool_handlers.yaml", yaml.safe_dump({"handlers": [{
        "match": "Questions via AskUserQuestion", "patterns": ["AskUserQuestion"], "prompt": "Prefer Normal.",
    }]}))
    for case_id, args in CASES.items():
        # JSON is YAML: the probe (stdlib only) reads its mode from the workspace's input.yaml.
        project.case(case_id, {"q": case_id}, files={"input.yaml": json.dumps({"q": case_id, **args})})
    key = f"sk-ant-budget-{secrets.token_hex(8)}"
    upstream = ScriptedModelServer(parse_script(_upstream_steps())).start()
    env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": upstream.url}
    try:
        # Hard and soft: the controller raises its soft limit as far as the hard one allows,
        # and the attack must meet it at the common default of 1024.
        with ControllerSampler(f"atk-budget-{runtime}-") as sampler:
            run = run_attack(project, runtime, "budget", env=env, timeout=900,
                             wrapper=("prlimit", f"--nofile={CONTROLLER_NOFILE}:{CONTROLLER_NOFILE}", "--"))
    finally:
        upstream.close()
    return {"run": run, "served": upstream.requests, "sampler": sampler, "key": key}


def _log(run: AttackRun, case_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run.result.case(case_id) / "gateway.jsonl").read_text().splitlines()]


def _probe(run: AttackRun, case_id: str, name: str) -> list[dict[str, Any]]:
    return by_probe(run.output(case_id)).get(name, [])


def _assistant_turns(body: Any) -> int:
    messages = body.get("messages") if isinstance(body, dict) else None
    return sum(1 for m in messages or [] if isinstance(m, dict) and m.get("role") == "assistant")


def _source_types(value: Any) -> list[str]:
    """The `source.type` of every content block anywhere in a body."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("source"), dict):
                found.append(str(item["source"].get("type")))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def test_requests_sent_at_once_stay_within_the_budget(budget_run: dict[str, Any]) -> None:
    run: AttackRun = budget_run["run"]
    (burst,) = _probe(run, "burst", "burst")
    statuses = burst["statuses"]
    assert len(statuses) == 8 and statuses.count(402) >= 5 and 1 <= statuses.count(200) <= 2, statuses
    entry = run.entry("burst")
    # Each request reserved its worst case before it went upstream, so together they never pass the
    # budget. The reservation of one request can be short only by its input side (a body that
    # expands upstream, like a PDF); here the bodies are text, and the total stays within $0.50.
    assert entry["gateway"]["spent_usd"] <= BUDGET, entry["gateway"]
    forwarded = [r for r in _log(run, "burst") if _assistant_turns(r["request"]) == BURST_STEP
                 and r["outcome"] == "forwarded"]
    assert len(forwarded) == statuses.count(200)
    assert all(r["cost_usd"] <= r["reserved_usd"] for r in forwarded)
    upstream_saw = [r for r in budget_run["served"] if _assistant_turns(r.body) == BURST_STEP]
    assert len(upstream_saw) == statuses.count(200)
    record_fact("budget: 8 slow requests at once on $0.50 — statuses", run.runtime,
                f"{statuses.count(200)} × 200, {statuses.count(402)} × 402")
    record_fact("budget: recorded spend of the burst case (budget $0.50)", run.runtime,
                round(entry["gateway"]["spent_usd"], 4), "USD")
    lowered = [r["max_tokens_lowered_from"] for r in forwarded if r["max_tokens_lowered_from"]]
    record_fact("budget: max_tokens of admitted burst requests", run.runtime,
                [r["request"]["max_tokens"] for r in forwarded], f"(lowered from {lowered})")


def test_a_stream_cut_off_by_the_client_is_charged_its_reservation(budget_run: dict[str, Any]) -> None:
    run: AttackRun = budget_run["run"]
    (probe,) = _probe(run, "cutoff", "cutoff")
    assert probe["saw_start"]
    (record,) = [r for r in _log(run, "cutoff") if _assistant_turns(r["request"]) == CUTOFF_STEP]
    assert record["outcome"] == "client_disconnected", record["outcome"]
    # 10,000 output tokens at $15 per MTok were reserved, and read to the end cost ~$0.15.
    assert record["reserved_usd"] >= 0.15 and record["cost_usd"] >= record["reserved_usd"]
    assert "client went away" in record["charge_note"]
    record_fact("budget: stream cut off after message_start — charged / reserved", run.runtime,
                f"${record['cost_usd']:.4f} / ${record['reserved_usd']:.4f} (message_start alone reported "
                f"${300 * 3e-6 + 15e-6:.5f})")


def test_what_the_policy_refuses_never_reaches_the_upstream(budget_run: dict[str, Any]) -> None:
    run: AttackRun = budget_run["run"]
    answers = {p["label"]: p for p in _probe(run, "policy", "policy")}
    for label in ("other_model", "web_fetch", "web_search", "mcp_servers", "container", "url_image"):
        assert answers[label]["status"] == 400, (label, answers[label])
        assert "invalid_request_error" in answers[label]["answer"]
    assert "not allowed" in answers["other_model"]["answer"]
    assert answers["absurd_max_tokens"]["status"] == 200 and answers["mcp_beta"]["status"] == 200
    # The upstream's own record: of everything any case sent, nothing with server-side reach,
    # no model but the allowed ones, no max_tokens over the ceiling, no reaching beta.
    served = budget_run["served"]
    bodies = [r.body for r in served if isinstance(r.body, dict)]
    # The CLI's tools are client tools: no `type` (or `custom`).
    assert bodies and all(t.get("type", "custom") == "custom" for b in bodies for t in b.get("tools") or [])
    assert not any(key in b for b in bodies for key in ("mcp_servers", "container"))
    assert not any(source in ("url", "file") for b in bodies for source in _source_types(b))
    assert {b["model"] for b in bodies} <= {"claude-sonnet-4-6", "claude-haiku-4-5-20251001"}
    assert all(b.get("max_tokens", 0) <= 128_000 for b in bodies)
    assert not any("mcp-client" in r.headers.get("anthropic-beta", "") for r in served)
    probes = [b for b in bodies if _assistant_turns(b) == POLICY_STEP]
    assert len(probes) == 2 and min(b["max_tokens"] for b in probes) == 1000
    log = _log(run, "policy")
    refused = [r for r in log if r["outcome"] == "policy_refused"]
    assert len(refused) == 6
    absurd = next(r for r in log if r["max_tokens_lowered_from"] == 10**9)
    beta = next(r for r in log if r["betas_dropped"])
    assert beta["betas_dropped"] == ["mcp-client-2025-04-04"]
    record_fact("gateway policy: refused (400) / passed", run.runtime,
                f"{len(refused)} refused: {', '.join(sorted(a for a in answers if answers[a]['status'] == 400))}; "
                f"max_tokens 10^9 forwarded as {absurd['request']['max_tokens']}; mcp-client beta dropped")


def test_forged_questions_cannot_spend_the_host_s_model_unpaid(budget_run: dict[str, Any]) -> None:
    run: AttackRun = budget_run["run"]
    (forge,) = _probe(run, "forge", "forge")
    decisions = forge["decisions"]
    assert decisions["huge"] == {"deny": 200}, decisions
    assert set(decisions["small"]) == {"allow"} and decisions["write"] == {"pass": 40}
    case = run.result.case("forge")
    records = [json.loads(line) for line in (case / "tool_decisions.jsonl").read_text().splitlines()]
    asked = [d for r in records for d in r.get("answer_details") or [] if d.get("tier") == "llm" or
             (d.get("error") or "").startswith(("ValueError", "BadRequest"))]
    # The hook model is the upstream too: its own count of hook-model requests.
    hook_calls = [r for r in budget_run["served"] if "You are answering a question" in json.dumps(r.body)]
    charged = [r for r in _log(run, "forge") if r["outcome"] == "hook_model"]
    assert 1 <= len(hook_calls) <= 20 and len(charged) == len(hook_calls) == len(asked)
    assert all(r["cost_usd"] > 0 for r in charged)
    assert run.entry("forge")["gateway"]["spent_usd"] >= sum(r["cost_usd"] for r in charged)
    size = (case / "tool_decisions.jsonl").stat().st_size
    longest = max(len(line) for line in (case / "tool_decisions.jsonl").read_text().splitlines())
    assert size < 8 * 1024 * 1024 and longest < 256 * 1024
    record_fact("hook broker: forged questions (200 × 600k chars, 30 small) — hook-model calls, all charged",
                run.runtime, len(hook_calls), f"(cap 20; ${sum(r['cost_usd'] for r in charged):.4f})")
    record_fact("hook broker: tool_decisions.jsonl after 40 forged 12 MiB events (+230 questions)", run.runtime,
                size, f"bytes, longest line {longest}; {forge['seconds']} s")


def test_a_connection_flood_neither_takes_the_controller_nor_the_neighbour(budget_run: dict[str, Any]) -> None:
    run: AttackRun = budget_run["run"]
    sampler: ControllerSampler = budget_run["sampler"]
    floods = {p["socket"].rsplit("/", 1)[1]: p for p in _probe(run, "flood", "flood")}
    assert set(floods) == {"gateway.sock", "broker.sock"}
    for name, flood in floods.items():
        assert flood["opened"] == 1500 and flood["connect_failed"] == 0, (name, flood)
        # The host holds at most its cap of a case's connections; the rest it closed at once.
        assert flood["held"] <= 32 and flood["closed_by_host"] >= flood["opened"] - 32, (name, flood)
    assert run.entry("neighbour")["exit_code"] == 0 and _probe(run, "neighbour", "neighbour")
    assert run.entry("flood")["end_reason"] == "exited"
    assert sampler.samples > 20 and sampler.nofile is not None and sampler.nofile.startswith(str(CONTROLLER_NOFILE))
    # Two floods of 1,500 held together; before the caps each connection was a descriptor and a thread.
    assert sampler.max_fds < 400 and sampler.max_threads < 400, (sampler.max_fds, sampler.max_threads)
    record_fact("flood: 1,500 idle connections to each socket — held by the host / closed at once",
                run.runtime, "; ".join(f"{n}: {f['held']} / {f['closed_by_host']}" for n, f in floods.items()))
    record_fact("flood: the controller's peak open descriptors / threads (soft limit 1,024)", run.runtime,
                f"{sampler.max_fds} / {sampler.max_threads}")


def _key_of(headers: dict[str, str]) -> str | None:
    lowered = {name.lower(): value for name, value in headers.items()}
    # The gateway sends x-api-key; the hook model's SDK (2.x) sends the same key as a bearer token.
    return lowered.get("x-api-key") or lowered.get("authorization", "").removeprefix("Bearer ") or None


def test_the_key_only_reached_the_upstream(budget_run: dict[str, Any]) -> None:
    """The forged requests carried the sandbox's own header; the gateway replaced it."""
    served = budget_run["served"]
    assert served and {_key_of(r.headers) for r in served} == {budget_run["key"]}
    for case_id in CASES:
        assert budget_run["key"] not in (budget_run["run"].result.case(case_id) / "gateway.jsonl").read_text()
