"""Performance benchmarks: every figure a ratio against a floor measured in the same run.

    .venv/bin/python benchmarks/perf.py e2e     [--cases 8] [--runs 5] [--tool-calls 1] [--model-delay 0] [--cpus 1]
                                                [--runtime crun]
    .venv/bin/python benchmarks/perf.py latency [--requests 500]         # gateway and hook broker, per request
    .venv/bin/python benchmarks/perf.py soak    [--cases 1000]           # memory, descriptors, leftovers, rate
    .venv/bin/python benchmarks/perf.py budget  [--cases 8] [--more 24] [--runs 5] [--cpus 1] [--runtime crun]
                                                # who spends a case's CPU
    .venv/bin/python benchmarks/perf.py lifecycle [--runs 8] [--each 5] [--runtime crun]
                                                # a sandbox's life, layer by layer, against a bare container

`e2e` runs an eval of trivial cases (one Bash call and an answer each, the
scripted model offline) through `agent-eval-sandbox run`, `--runs` times at
parallelism 1 and 2, and in the same loop the floors:

- the bare `docker run --rm --network none IMAGE true`;
- each case's prompt run as the reference runs it locally: `claude -p` on the
  host (the binary baked into the image), no container, the same scripted
  model, a fresh copy of the same workspace — one after the other, and two at
  once.

It prints, each the median of the per-run values:
- controller overhead per case (`duration_s - agent_duration_s` of a sequential
  run) ÷ the floor — target ≤ 1.0, stretch ≤ 0.5;
- a sandboxed case ÷ the same case on the host — target ≤ 1.3 (per case; the
  whole `run` command ÷ the sum of the host runs is printed too);
- the speed-up of parallelism 2 over 1 (span of the cases) ÷ the host's (two
  CLIs at once over one after the other) — target ≥ 0.9.

`latency` times model requests sent through a gateway channel (unix socket)
against the same requests sent straight to the scripted model server,
interleaved, and hook-broker round trips (the hook client's protocol) — p50
and p99. `soak` runs `--cases` trivial cases at parallelism 2 and samples the
controller's RSS and open descriptors against the number of finished cases,
then counts what the run left behind (containers, volumes, temp directories).

`budget` says who spends the CPU a case costs the machine, the figure that
bounds the parallel speed-up on a busy machine: a run of `--cases` and one of
`--cases + --more` at parallelism 2, the difference divided by `--more` (so the
run's own start and scoring drop out), over the span of the cases (as `e2e`
reads the machine) and over the whole runs, split by the kernel's counters
(`cpu_accounts.py`) into the containers (and, by polling, their processes),
dockerd, containerd, the controller and the rest; beside it what the same cases
cost the machine and the CLI itself when run on the host.

`lifecycle` (`lifecycle.py`) takes the Docker side of a case apart: the machine's
CPU a bare container's life costs, and what the sandbox's configuration, its
lifeline, its launcher on standby and an exec each add, interleaved in every round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.cpu_accounts import (  # noqa: E402
    ContainerProcesses,
    CpuReading,
    CpuSampler,
    CpuSpent,
    Samples,
    containers_cgroup,
    machine_busy_s,
)
from benchmarks.lifecycle import bare_docker_run  # noqa: E402
from benchmarks.lifecycle import lifecycle as lifecycle_layers  # noqa: E402
from tests.integration.claude_on_host import host_claude_argv, host_claude_env  # noqa: E402

R = TypeVar("R")
MODEL = "claude-sonnet-4-6"
SKILL = "---\nname: bench\ndescription: writes a marker\n---\nRun what the arguments say.\n"


# ---- the eval of trivial cases ---------------------------------------------------------------


def trivial_project(root: Path, cases: int, tool_calls: int = 1, model_delay_s: float = 0.0,
                    cpus: float | None = None, runtime: str | None = None) -> Path:
    """An eval of `cases` cases: `tool_calls` Bash calls and an answer each, no judges but a code check;
    the scripted model takes `model_delay_s` over each answer (a real model's time to answer); `cpus`
    overrides the sandbox's CPU limit (`sandbox.cpus`, default 1), `runtime` its container runtime."""
    root.mkdir(parents=True)
    sandbox = {key: value for key, value in (("cpus", cpus), ("runtime", runtime)) if value is not None}
    (root / "eval.yaml").write_text(
        "name: bench\n"
        "execution: {skill: bench, arguments: '{task}', timeout: 120, max_budget_usd: 1}\n"
        f"models: {{skill: {MODEL}}}\n"
        "runner: {permission_mode: bypassPermissions}\n"
        "dataset: {path: cases, workspace: {files: [notes.txt]}}\n"
        + (f"sandbox: {json.dumps(sandbox)}\n" if sandbox else "")
        + "judges:\n"
          "  - name: exited\n"
          "    check: |\n"
          "      return outputs.get('exit_code') == 0, 'exit code'\n"
    )
    skill = root / ".claude" / "skills" / "bench" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL)
    for index in range(cases):
        case = root / "cases" / f"c{index:04d}"
        case.mkdir(parents=True)
        (case / "input.yaml").write_text(yaml.safe_dump({"task": f"mark case {index}"}))
        (case / "notes.txt").write_text(f"notes of case {index}\n")
        steps: list[dict[str, Any]] = [
            {"tool": "Bash", "input": {"command": f"echo case-{index} > marker.txt && cat notes.txt"}}]
        steps += [{"tool": "Bash", "input": {"command": f"echo call-{call} >> marker.txt && wc -l marker.txt"}}
                  for call in range(1, tool_calls)]
        steps.append({"text": f"case {index} marked"})
        if model_delay_s:
            steps = [{**step, "delay_s": model_delay_s} for step in steps]
        (case / "model_script.yaml").write_text(yaml.safe_dump(steps, sort_keys=False))
    return root / "eval.yaml"


@dataclass
class RunMeasure:
    wall_s: float
    run_dir: Path
    cases: list[dict[str, Any]]

    @property
    def span_s(self) -> float:
        """From the first case's start to the last one's end: the cases, without the run's set-up and scoring."""
        start, end = self.span
        return end - start

    @property
    def span(self) -> tuple[float, float]:
        return (min(float(c["started_at"]) for c in self.cases),
                max(float(c["started_at"]) + float(c["duration_s"]) for c in self.cases))

    @property
    def overheads(self) -> list[float]:
        return [c["duration_s"] - c["agent_duration_s"] for c in self.cases]


class MachineCpu(Samples[float]):
    """The machine's busy CPU time (every core, `/proc/stat`), sampled every 20 ms in a thread of its own,
    to read off any stretch of wall-clock time: what a stretch of work cost the whole machine, Docker's
    daemons and every process of the sandboxes included."""

    def __init__(self) -> None:
        super().__init__(machine_busy_s)

    def busy_s(self, start: float, end: float) -> float:
        """CPU-seconds the machine was busy from `start` to `end` (epoch seconds, to a sample's 20 ms)."""
        first, last = self.around(start, end)
        return last - first


def run_eval(eval_yaml: Path, parallelism: int, runs_dir: Path, *, run_id: str | None = None,
             env: dict[str, str] | None = None, live: set[int] | None = None) -> RunMeasure:
    """`live`: a set the `run` process's pid is in while it runs (for a sampler that reads it live)."""
    run_id = run_id or f"bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(eval_yaml), "--offline", "--json",
         "--parallelism", str(parallelism), "--runs-dir", str(runs_dir), "--run-id", run_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    if live is not None:
        live.add(process.pid)
    try:
        stdout, stderr = process.communicate()
    finally:
        if live is not None:
            live.discard(process.pid)
    wall = time.perf_counter() - started
    if process.returncode not in (0, 1):
        raise SystemExit(f"the run failed ({process.returncode}):\n{stderr[-3000:]}")
    data = json.loads(stdout)
    cases = list(data["run_result"]["per_case"].values())
    bad = [c for c in cases if c.get("exit_code") != 0]
    if bad:
        raise SystemExit(f"{len(bad)} case(s) did not exit 0, e.g. {bad[0]}")
    return RunMeasure(wall, Path(data["run_dir"]), cases)


def sandbox_image() -> str:
    from agent_eval_sandbox.sandbox.image import ensure_sandbox_image

    return ensure_sandbox_image().ref


# ---- the same case on the host, as the reference's local mode runs it ---------------------------------


@dataclass
class HostCase:
    prompt: str
    script: Path
    workspace_files: list[Path]


def host_cases(project: Path, run_dir: Path) -> list[HostCase]:
    """Each case's prompt as the sandboxed run sent it, its model script and its workspace files."""
    from agent_eval_sandbox.rundir.layout import RunDir

    cases = []
    for case_dir in sorted((project / "cases").iterdir()):
        prompt = RunDir(run_dir).case(case_dir.name).prompt.read_text()
        cases.append(HostCase(prompt, case_dir / "model_script.yaml", [case_dir / "notes.txt"]))
    return cases


def run_on_host(case: HostCase, project: Path, claude: Path, scratch: Path) -> float:
    """One `claude -p` on the host against the case's scripted model, in a fresh copy of its workspace."""
    from agent_eval_sandbox.gateway import ScriptedModelServer
    from agent_eval_sandbox.gateway.script import load_script

    with ScriptedModelServer(load_script(str(case.script))) as server:
        work = Path(tempfile.mkdtemp(prefix="ws-", dir=scratch))
        home = Path(tempfile.mkdtemp(prefix="home-", dir=scratch))
        started = time.perf_counter()
        for path in case.workspace_files:
            shutil.copy2(path, work / path.name)
        shutil.copytree(project / ".claude", work / ".claude")
        process = subprocess.run(host_claude_argv(str(claude)), input=case.prompt, capture_output=True, text=True,
                                 cwd=work, env=host_claude_env(server.url, str(home)), timeout=120)
        elapsed = time.perf_counter() - started
    if process.returncode != 0 or '"type":"result"' not in process.stdout.replace(" ", ""):
        raise SystemExit(f"claude on the host failed ({process.returncode}): {process.stderr[-2000:]}")
    return elapsed


def host_sequential(cases: Sequence[HostCase], project: Path, claude: Path, scratch: Path) -> tuple[float, list[float]]:
    started = time.perf_counter()
    each = [run_on_host(case, project, claude, scratch) for case in cases]
    return time.perf_counter() - started, each


def host_two_at_once(cases: Sequence[HostCase], project: Path, claude: Path, scratch: Path) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda case: run_on_host(case, project, claude, scratch), cases))
    return time.perf_counter() - started


# ---- reporting -----------------------------------------------------------------------------------


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


# ---- e2e -------------------------------------------------------------------------------------------


@dataclass
class E2eRound:
    floor: list[float] = field(default_factory=list)
    p1: RunMeasure | None = None
    p2: RunMeasure | None = None
    host_each: list[float] = field(default_factory=list)
    host_sequential_s: float = 0.0
    host_pairs_s: float = 0.0
    # The machine's CPU a case cost over the span of the cases at parallelism 2, and over the host's pairs.
    p2_cpu_per_case_s: float = 0.0
    host_pairs_cpu_per_case_s: float = 0.0

    def speedup_over_ceiling(self) -> float:
        assert self.p1 is not None and self.p2 is not None
        return (self.p1.span_s / self.p2.span_s) / (self.host_sequential_s / self.host_pairs_s)

    def cpu_over_host(self) -> float:
        return self.p2_cpu_per_case_s / self.host_pairs_cpu_per_case_s


def spread(values: Sequence[float]) -> str:
    """The range over the rounds, printed next to a median: one round's figure moves with the VM's pace."""
    return f"rounds {min(values):.2f}-{max(values):.2f}"


def e2e(args: argparse.Namespace) -> dict[str, Any]:
    from agent_eval_sandbox.sandbox.claude_binary import ensure_claude_binary

    image = sandbox_image()
    claude = ensure_claude_binary().path
    print(f"image {image}; {load_line()}", flush=True)
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        # ~0.1-0.2 s of CPU at each start on the dev VMs (when no bytecode was written before): whole-run figure only.
        print("note: PYTHONDONTWRITEBYTECODE is set, so each `run` compiles the tool's modules as it starts",
              flush=True)
    rounds: list[E2eRound] = []
    with tempfile.TemporaryDirectory(prefix="aes-bench-") as tmp, MachineCpu() as machine:
        scratch = Path(tmp)
        eval_yaml = trivial_project(scratch / "project", args.cases, args.tool_calls, args.model_delay, args.cpus,
                                    args.runtime)
        project = eval_yaml.parent
        warm = run_eval(eval_yaml, 1, scratch / "runs")  # warm-up: image, page cache, binary
        cases = host_cases(project, warm.run_dir)
        run_on_host(cases[0], project, claude, scratch)
        bare_docker_run(image, args.runtime)
        for index in range(args.runs):
            one = E2eRound()
            one.floor = [bare_docker_run(image, args.runtime) for _ in range(args.floor_runs)]
            one.p1 = run_eval(eval_yaml, 1, scratch / "runs")
            one.host_sequential_s, one.host_each = host_sequential(cases, project, claude, scratch)
            one.p2 = run_eval(eval_yaml, 2, scratch / "runs")
            one.p2_cpu_per_case_s = machine.busy_s(*one.p2.span) / len(one.p2.cases)
            pairs_started = time.time()
            one.host_pairs_s = host_two_at_once(cases, project, claude, scratch)
            one.host_pairs_cpu_per_case_s = machine.busy_s(pairs_started, time.time()) / len(cases)
            one.floor += [bare_docker_run(image, args.runtime) for _ in range(args.floor_runs)]
            rounds.append(one)
            print(f"round {index + 1}/{args.runs}: floor {ms(statistics.median(one.floor))}, "
                  f"p1 case {statistics.median(c['duration_s'] for c in one.p1.cases):.3f}s "
                  f"(overhead {ms(statistics.median(one.p1.overheads))}), host case "
                  f"{statistics.median(one.host_each):.3f}s, speed-up / ceiling {one.speedup_over_ceiling():.2f}, "
                  f"machine CPU / host {one.cpu_over_host():.2f}; {load_line()}", flush=True)

    def per_round(value: Callable[[E2eRound], float]) -> float:
        return statistics.median(value(r) for r in rounds)

    def p1(r: E2eRound) -> RunMeasure:
        assert r.p1 is not None
        return r.p1

    def p2(r: E2eRound) -> RunMeasure:
        assert r.p2 is not None
        return r.p2

    floor = per_round(lambda r: statistics.median(r.floor))
    overhead = per_round(lambda r: statistics.median(p1(r).overheads))
    overhead_ratio = per_round(lambda r: statistics.median(p1(r).overheads) / statistics.median(r.floor))
    case_s = per_round(lambda r: statistics.median(c["duration_s"] for c in p1(r).cases))
    agent_s = per_round(lambda r: statistics.median(c["agent_duration_s"] for c in p1(r).cases))
    host_s = per_round(lambda r: statistics.median(r.host_each))
    vs_host = per_round(lambda r: statistics.median(c["duration_s"] for c in p1(r).cases)
                        / statistics.median(r.host_each))
    run_vs_host = per_round(lambda r: p1(r).wall_s / r.host_sequential_s)
    speedup = per_round(lambda r: p1(r).span_s / p2(r).span_s)
    ceiling = per_round(lambda r: r.host_sequential_s / r.host_pairs_s)
    parallel_ratios = [r.speedup_over_ceiling() for r in rounds]
    parallel_ratio = statistics.median(parallel_ratios)
    p2_cpu = per_round(lambda r: r.p2_cpu_per_case_s)
    host_cpu = per_round(lambda r: r.host_pairs_cpu_per_case_s)
    cpu_ratios = [r.cpu_over_host() for r in rounds]
    cpu_ratio = statistics.median(cpu_ratios)
    results = {
        "cases_per_run": args.cases, "runs": args.runs, "tool_calls": args.tool_calls,
        "model_delay_s": args.model_delay, "sandbox_cpus": args.cpus or 1,
        "runtime": args.runtime, "floor_docker_run_s": floor,
        "case_s": case_s, "agent_exec_s": agent_s, "controller_overhead_s": overhead,
        "overhead_over_floor": overhead_ratio,
        "host_case_s": host_s, "case_over_host_case": vs_host, "run_over_host_sequence": run_vs_host,
        "speedup_p2": speedup, "host_speedup_two_at_once": ceiling, "speedup_over_ceiling": parallel_ratio,
        "machine_cpu_per_case_p2_s": p2_cpu, "machine_cpu_per_case_host_pairs_s": host_cpu,
        "machine_cpu_per_case_over_host": cpu_ratio,
        "speedup_over_ceiling_rounds": parallel_ratios, "machine_cpu_per_case_over_host_rounds": cpu_ratios,
    }
    print(f"\nmedians of {args.runs} rounds, {args.cases} cases a run, {args.tool_calls} tool call(s) a case, "
          f"the model answering in {args.model_delay:g}s, sandbox.cpus {args.cpus or 1:g}, runtime "
          f"{args.runtime or 'the daemon default'}; {load_line()}")
    print(f"  floor (docker run --rm --network none IMAGE true)   {ms(floor)}")
    print(f"  sandboxed case {case_s:.3f}s = agent exec {agent_s:.3f}s + controller overhead {ms(overhead)}")
    print(f"  controller overhead / floor                         {overhead_ratio:.2f}   (target <= 1.0, stretch 0.5)")
    print(f"  host case (claude -p, no container)                 {host_s:.3f}s")
    print(f"  sandboxed case / host case                          {vs_host:.2f}   (target <= 1.3)")
    print(f"  whole `run` / host cases one after the other        {run_vs_host:.2f}   (set-up and scoring included)")
    print(f"  speed-up parallelism 2 over 1 (span of the cases)   {speedup:.2f}x")
    print(f"  ceiling: host, two at once over one after the other {ceiling:.2f}x")
    print(f"  speed-up / ceiling                                  {parallel_ratio:.2f}   (target >= 0.9; "
          f"{spread(parallel_ratios)})")
    print(f"  machine CPU a case at parallelism 2                 {ms(p2_cpu)}, host pairs {ms(host_cpu)}: "
          f"{cpu_ratio:.2f}x   (what bounds the speed-up on a busy machine; {spread(cpu_ratios)})")
    return results


# ---- latency ---------------------------------------------------------------------------------------


def _post(sock: socket.socket, body: bytes) -> bytes:
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"x-api-key: placeholder\r\nanthropic-version: 2023-06-01\r\n"
                 b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(rest) >= length:
                return data
            if length is None and rest.endswith(b"0\r\n\r\n"):
                return data


def _request(connect: Callable[[], socket.socket], body: bytes) -> float:
    started = time.perf_counter()
    with connect() as sock:
        reply = _post(sock, body)
    elapsed = time.perf_counter() - started
    if not reply.startswith(b"HTTP/1.1 200") and not reply.startswith(b"HTTP/1.0 200"):
        raise SystemExit(f"request failed: {reply[:300]!r}")
    return elapsed


def latency(args: argparse.Namespace) -> dict[str, Any]:
    from agent_eval_sandbox.gateway import Credentials, ModelGateway, ScriptedModelServer
    from agent_eval_sandbox.gateway.policy import GatewayPolicy, ModelAllowlist
    from agent_eval_sandbox.gateway.script import parse_script
    from agent_eval_sandbox.interception import Broker, CaseContext
    from agent_eval_sandbox.interception.handlers import parse_handlers

    print(load_line(), flush=True)
    steps = [{"text": "ok", "usage": {"input_tokens": 50, "output_tokens": 5}}]
    # A request about the size of the CLI's first one (~88 KB of system prompt and tools).
    body = json.dumps({"model": MODEL, "max_tokens": 1024, "stream": True,
                       "system": "x" * 80_000, "messages": [{"role": "user", "content": "hi"}]}).encode()
    direct: list[float] = []
    through: list[float] = []
    with tempfile.TemporaryDirectory(prefix="aes-lat-", dir="/tmp") as tmp, \
            ScriptedModelServer(parse_script({"advance": "per_request", "steps": steps * (2 * args.requests + 20)})) \
            as server:
        gateway = ModelGateway(server.url, Credentials(api_key="sk-bench"),
                               policy=GatewayPolicy(models=ModelAllowlist.of([MODEL])))
        channel = gateway.open_channel("bench", Path(tmp) / "g.sock", 10_000.0, Path(tmp) / "gateway.jsonl")

        def tcp() -> socket.socket:
            return socket.create_connection(("127.0.0.1", server.port))

        def unix() -> socket.socket:
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(str(channel.socket_path))
            return sock

        for _ in range(10):  # warm-up
            _request(tcp, body)
            _request(unix, body)
        for _ in range(args.requests):
            direct.append(_request(tcp, body))
            through.append(_request(unix, body))
        channel.close()
        gateway.close()

        handlers = parse_handlers({"handlers": [{"match": "jira", "patterns": ["Bash"],
                                                 "input_filters": ["jira"]}]}, "bench")
        broker = Broker("bench", Path(tmp) / "b.sock", handlers, CaseContext(), {}, Path(tmp) / "decisions.jsonl",
                        answerer=None).start()
        event = json.dumps({"session_id": "s", "transcript_path": "/home/agent/.claude/projects/-workspace/s.jsonl",
                            "cwd": "/workspace", "permission_mode": "bypassPermissions",
                            "hook_event_name": "PreToolUse", "tool_name": "Bash",
                            "tool_input": {"command": "ls -la"}}).encode()
        hooks: list[float] = []
        for index in range(args.requests + 10):
            started = time.perf_counter()
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(broker.socket_path))
                sock.sendall(b"agent-eval-hook/1\n" + event.replace(b'"s"', b'"s%d"' % index, 1))
                sock.shutdown(socket.SHUT_WR)
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
            if index >= 10:
                hooks.append(time.perf_counter() - started)
            if b"decision" not in reply:
                raise SystemExit(f"the broker answered {reply[:200]!r}")
        broker.close()

    added = [t - d for t, d in zip(through, direct, strict=True)]
    results = {
        "requests": args.requests,
        "direct_p50_s": pct(direct, 50), "direct_p99_s": pct(direct, 99),
        "gateway_p50_s": pct(through, 50), "gateway_p99_s": pct(through, 99),
        "gateway_added_p50_s": pct(through, 50) - pct(direct, 50),
        "gateway_added_p99_s": pct(through, 99) - pct(direct, 99),
        "gateway_added_paired_p50_s": pct(added, 50), "gateway_added_paired_p99_s": pct(added, 99),
        "broker_p50_s": pct(hooks, 50), "broker_p99_s": pct(hooks, 99),
    }
    print(f"model request of {len(body) // 1000} KB, streamed; {args.requests} each, interleaved; {load_line()}")
    print(f"  straight to the scripted model   p50 {ms(results['direct_p50_s'])}  p99 {ms(results['direct_p99_s'])}")
    print(f"  through a gateway channel        p50 {ms(results['gateway_p50_s'])}  p99 {ms(results['gateway_p99_s'])}")
    print(f"  added by the gateway             p50 {ms(results['gateway_added_p50_s'])}  "
          f"p99 {ms(results['gateway_added_p99_s'])}   (target p50 <= 5 ms)")
    print(f"  hook broker round trip           p50 {ms(results['broker_p50_s'])}  p99 {ms(results['broker_p99_s'])}"
          "   (target p50 <= 10 ms)")
    return results


# ---- soak ------------------------------------------------------------------------------------------


def _rss_and_fds(pid: int) -> tuple[int, int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return rss_kb * 1024, fds


def soak(args: argparse.Namespace) -> dict[str, Any]:
    from agent_eval_sandbox.sandbox import labels as L
    from agent_eval_sandbox.sandbox.docker_errors import connect

    print(f"{args.cases} cases at parallelism {args.parallelism}; {load_line()}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="aes-soak-", dir="/tmp"))
    # The run's own temp directory: what it leaves there (staging, sandbox host directories) is its own.
    run_tmp = scratch / "t"
    run_tmp.mkdir()
    eval_yaml = trivial_project(scratch / "project", args.cases)
    run_id = f"soak-{uuid.uuid4().hex[:8]}"
    runs_dir = scratch / "runs"
    cases_dir = runs_dir / "bench" / run_id / "cases"
    env = {**os.environ, "TMPDIR": str(run_tmp)}
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(eval_yaml), "--offline", "--json",
         "--parallelism", str(args.parallelism), "--runs-dir", str(runs_dir), "--run-id", run_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    samples: list[tuple[float, int, int, int]] = []  # (time, finished cases, rss, fds)
    output: dict[str, str] = {}

    def drain() -> None:
        out, err = process.communicate()
        output["stdout"], output["stderr"] = out, err

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    next_report = 100
    while process.poll() is None:
        finished = sum(1 for _ in cases_dir.glob("*/run_result.json")) if cases_dir.exists() else 0
        sample = _rss_and_fds(process.pid)
        if sample is not None:
            samples.append((time.perf_counter() - started, finished, *sample))
            if finished >= next_report:
                print(f"  {finished} cases: RSS {sample[0] / 2**20:.1f} MiB, {sample[1]} fds, "
                      f"{time.perf_counter() - started:.0f}s; {load_line()}", flush=True)
                next_report += 100
        time.sleep(args.sample_s)
    reader.join()
    wall = time.perf_counter() - started
    if process.returncode not in (0, 1):
        raise SystemExit(f"the soak run failed ({process.returncode}):\n{output.get('stderr', '')[-3000:]}")
    data = json.loads(output["stdout"])
    per_case = list(data["run_result"]["per_case"].values())
    ok = sum(1 for c in per_case if c.get("exit_code") == 0)
    span = (max(c["started_at"] + c["duration_s"] for c in per_case) - min(c["started_at"] for c in per_case))

    def at(cases: int) -> tuple[int, int]:
        near = [s for s in samples if s[1] >= cases]
        return (near[0][2], near[0][3]) if near else (samples[-1][2], samples[-1][3])

    first = min(100, args.cases)
    in_window = [s for s in samples if first <= s[1] < args.cases] or samples
    rss_first, fds_first = at(first)
    rss_last, fds_last = in_window[-1][2], in_window[-1][3]
    rss_peak = max(s[2] for s in in_window)
    fds_peak = max(s[3] for s in in_window)

    api = connect().api
    label = {"label": f"{L.RUN_ID}={run_id}"}
    containers = api.containers(all=True, filters=label)
    volumes = api.volumes(filters=label).get("Volumes") or []
    left_in_tmp = sorted(p.name for p in run_tmp.iterdir())
    results = {
        "cases": args.cases, "parallelism": args.parallelism, "exited_0": ok,
        "wall_s": wall, "cases_span_s": span, "cases_per_minute": args.cases / span * 60,
        "cases_per_minute_whole_run": args.cases / wall * 60,
        f"rss_at_case_{first}_mib": rss_first / 2**20, "rss_at_end_mib": rss_last / 2**20,
        "rss_peak_mib": rss_peak / 2**20, "rss_growth_mib": (rss_last - rss_first) / 2**20,
        "rss_peak_growth_mib": (rss_peak - rss_first) / 2**20,
        f"fds_at_case_{first}": fds_first, "fds_at_end": fds_last, "fds_peak": fds_peak,
        "containers_left": len(containers), "volumes_left": len(volumes), "temp_entries_left": left_in_tmp,
    }
    print(f"\n{args.cases} cases ({ok} exited 0) at parallelism {args.parallelism}; {load_line()}")
    print(f"  controller RSS at case {first}: {rss_first / 2**20:.1f} MiB, at the last sample: "
          f"{rss_last / 2**20:.1f} MiB (growth {results['rss_growth_mib']:+.1f}, peak {rss_peak / 2**20:.1f})"
          "   (target <= +50 MB)")
    print(f"  open descriptors at case {first}: {fds_first}, at the last sample: {fds_last} (peak {fds_peak})")
    print(f"  left after: {len(containers)} containers, {len(volumes)} volumes, temp entries {left_in_tmp}"
          "   (target 0)")
    print(f"  {results['cases_per_minute']:.1f} cases/minute over the cases "
          f"({results['cases_per_minute_whole_run']:.1f} over the whole run, {wall:.0f}s)")
    if args.keep:
        print(f"  kept: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    (Path(args.samples_out) if args.samples_out else Path(os.devnull)).write_text(
        "\n".join(f"{t:.1f} {n} {r} {f}" for t, n, r, f in samples) + "\n")
    return results


# ---- budget ----------------------------------------------------------------------------------------


@dataclass
class BudgetRound:
    """One round's CPU a case, in CPU-seconds, each the longer run's beyond the shorter one's ÷ the cases
    between them: over the span of the cases (what bounds the speed-up, as `e2e` reads the machine's) and
    over the whole runs (set-up, scoring and the last removals too); what the poll saw of each kind of
    process in a container (whole runs); and the same cases on the host."""

    span: CpuSpent
    whole: CpuSpent
    in_container: dict[str, float]
    host_sequential: CpuSpent
    host_pairs: CpuSpent


@dataclass
class SpentRun:
    """What a run cost: over its cases' span and in all, by who spent it; and what the poll saw of each kind
    of process in its containers (empty without the containers' cgroup)."""

    span: CpuSpent
    whole: CpuSpent
    in_containers: dict[str, float]


def spent_by(work: Callable[[], R]) -> tuple[CpuSpent, R]:
    """What `work()` cost, read exactly before and after it, and what it returned."""
    before = CpuReading.now()
    result = work()
    return CpuReading.now().since(before), result


def measured_run(eval_yaml: Path, parallelism: int, runs_dir: Path, cgroup: Path | None,
                 sampler: CpuSampler) -> SpentRun:
    with ContainerProcesses(cgroup) if cgroup is not None else nullcontext() as processes:
        whole, measure = spent_by(lambda: run_eval(eval_yaml, parallelism, runs_dir, live=sampler.live_children))
    return SpentRun(sampler.spent(*measure.span), whole, processes.by_label() if processes is not None else {})


def marginal_in_containers(short: dict[str, float], long: dict[str, float], more: int) -> dict[str, float]:
    """CPU-seconds a case of each kind of process the poll saw: the longer run's beyond the shorter one's."""
    labels = list(long) + [label for label in short if label not in long]
    return {label: (long.get(label, 0.0) - short.get(label, 0.0)) / more for label in labels}


def budget(args: argparse.Namespace) -> dict[str, Any]:
    from agent_eval_sandbox.sandbox.claude_binary import ensure_claude_binary

    image = sandbox_image()
    claude = ensure_claude_binary().path
    cgroup = containers_cgroup()
    print(f"image {image}; {load_line()}", flush=True)
    if cgroup is None:
        print("note: no cgroup of Docker's containers here (the systemd driver?): their share stays in the rest",
              flush=True)
    rounds: list[BudgetRound] = []
    with tempfile.TemporaryDirectory(prefix="aes-bench-") as tmp, CpuSampler() as sampler:
        scratch = Path(tmp)
        short = trivial_project(scratch / "short", args.cases, cpus=args.cpus, runtime=args.runtime)
        long = trivial_project(scratch / "long", args.cases + args.more, cpus=args.cpus, runtime=args.runtime)
        warm = run_eval(short, args.parallelism, scratch / "runs")
        cases = host_cases(short.parent, warm.run_dir)
        run_on_host(cases[0], short.parent, claude, scratch)
        for index in range(args.runs):
            short_run = measured_run(short, args.parallelism, scratch / "runs", cgroup, sampler)
            long_run = measured_run(long, args.parallelism, scratch / "runs", cgroup, sampler)
            host_sequential_spent, _ = spent_by(lambda: host_sequential(cases, short.parent, claude, scratch))
            host_pairs_spent, _ = spent_by(lambda: host_two_at_once(cases, short.parent, claude, scratch))
            one = BudgetRound(
                span=long_run.span.minus(short_run.span).per(args.more),
                whole=long_run.whole.minus(short_run.whole).per(args.more),
                in_container=marginal_in_containers(short_run.in_containers, long_run.in_containers, args.more),
                host_sequential=host_sequential_spent.per(len(cases)),
                host_pairs=host_pairs_spent.per(len(cases)),
            )
            rounds.append(one)
            print(f"round {index + 1}/{args.runs}: a case costs the machine {ms(one.span.machine_but_own or 0)} "
                  f"over the cases ({ms(one.whole.machine_but_own or 0)} over the whole run), the host "
                  f"{ms(one.host_pairs.machine_but_own or 0)} two at once; {load_line()}", flush=True)

    def median(value: Callable[[BudgetRound], float | None]) -> float | None:
        values = [v for v in (value(r) for r in rounds) if v is not None]
        return statistics.median(values) if values else None

    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 1000:6.0f} ms"

    def split(of: Callable[[BudgetRound], CpuSpent]) -> dict[str, float | None]:
        return {
            "machine": median(lambda r: of(r).machine_but_own),
            "containers": median(lambda r: of(r).containers),
            "dockerd": median(lambda r: of(r).dockerd),
            "containerd": median(lambda r: of(r).containerd),
            "controller": median(lambda r: of(r).children),
            "benchmark": median(lambda r: of(r).own),
            "rest": median(lambda r: of(r).rest),
        }

    span, whole = split(lambda r: r.span), split(lambda r: r.whole)
    labels = list(dict.fromkeys(label for r in rounds for label in r.in_container))
    in_container = {label: statistics.median(r.in_container.get(label, 0.0) for r in rounds) for label in labels}
    host = {
        "machine_sequential": median(lambda r: r.host_sequential.machine_but_own),
        "machine_pairs": median(lambda r: r.host_pairs.machine_but_own),
        "cli_sequential": median(lambda r: r.host_sequential.children),
    }
    ratios = [r.span.machine_but_own / r.host_pairs.machine_but_own for r in rounds
              if r.span.machine_but_own is not None and r.host_pairs.machine_but_own]
    ratio = statistics.median(ratios) if ratios else None
    print(f"\nCPU a case at parallelism {args.parallelism}, sandbox.cpus {args.cpus or 1:g}, runtime "
          f"{args.runtime or 'the daemon default'}: runs of {args.cases} "
          f"and {args.cases + args.more} cases, the difference / {args.more}; medians of {args.runs} rounds; "
          f"{load_line()}")
    print(f"{'':45s}{'the cases':>10s}{'whole run':>11s}")

    def row(name: str, key: str) -> None:
        print(f"  {name:43s}{shown(span[key]):>10s}{shown(whole[key]):>11s}")

    row("the machine, but this benchmark", "machine")
    row("  Docker's containers", "containers")
    row("  dockerd", "dockerd")
    row("  containerd", "containerd")
    row("  the controller (`run`)", "controller")
    row("  the rest: shims, runc, kernel threads", "rest")
    row("  (this benchmark's samplers, not counted)", "benchmark")
    print(f"  the host, two at once: {shown(host['machine_pairs']).strip()}; the cases / the host: "
          f"{'n/a' if ratio is None else f'{ratio:.2f}x'}{'' if not ratios else ' (' + spread(ratios) + ')'}")
    print(f"  the host, one after the other: the machine {shown(host['machine_sequential']).strip()}, "
          f"the CLI and its children {shown(host['cli_sequential']).strip()}")
    if in_container:
        seen = sum(in_container.values())
        print("  in the containers, by process (whole runs; a container a case):")
        for label, value in in_container.items():
            if abs(value) >= 0.0005:
                print(f"    {label:41s}{shown(value):>10s}")
        if whole["containers"] is not None:
            print(f"    {'not seen by the poll':41s}{shown(whole['containers'] - seen):>10s}"
                  "   (exits, and what lived under a poll)")
    return {"cases": args.cases, "more": args.more, "parallelism": args.parallelism, "runs": args.runs,
            "sandbox_cpus": args.cpus or 1, "runtime": args.runtime,
            "over_the_cases_case_s": span, "whole_run_case_s": whole,
            "in_container_case_s": in_container, "host_case_s": host,
            "cases_over_host_pairs": ratio, "cases_over_host_pairs_rounds": ratios}


def lifecycle(args: argparse.Namespace) -> dict[str, Any]:
    return lifecycle_layers(args, sandbox_image(), load_line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json-out", help="also write the figures to this file")
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("e2e", help="overhead per case, sandboxed vs host, parallel speed-up")
    one.add_argument("--cases", type=int, default=8)
    one.add_argument("--runs", type=int, default=5)
    one.add_argument("--tool-calls", type=int, default=1, help="Bash calls a case makes before its answer")
    one.add_argument("--model-delay", type=float, default=0.0,
                     help="seconds the scripted model takes over each answer (default: none)")
    one.add_argument("--cpus", type=float, help="the sandboxes' CPU limit (sandbox.cpus; default: 1, the tool's)")
    one.add_argument("--runtime", help="the sandboxes' container runtime (sandbox.runtime), the floor's too; "
                     "e.g. crun (scripts/install-crun.sh)")
    one.add_argument("--floor-runs", type=int, default=3, help="bare docker runs before and after each round")
    one.set_defaults(func=e2e)
    lat = commands.add_parser("latency", help="gateway latency per model request, hook-broker round trip")
    lat.add_argument("--requests", type=int, default=500)
    lat.set_defaults(func=latency)
    long = commands.add_parser("soak", help="many trivial cases: memory, descriptors, leftovers, rate")
    long.add_argument("--cases", type=int, default=1000)
    long.add_argument("--parallelism", type=int, default=2)
    long.add_argument("--sample-s", type=float, default=1.0)
    long.add_argument("--samples-out", help="write every sample (seconds, finished cases, RSS, fds) here")
    long.add_argument("--keep", action="store_true", help="keep the project and the run directory")
    long.set_defaults(func=soak)
    spend = commands.add_parser("budget", help="who spends the CPU a case costs the machine")
    spend.add_argument("--cases", type=int, default=8, help="cases of the shorter run, and the host's")
    spend.add_argument("--more", type=int, default=24, help="cases the longer run has beyond the shorter")
    spend.add_argument("--runs", type=int, default=5)
    spend.add_argument("--parallelism", type=int, default=2)
    spend.add_argument("--cpus", type=float, help="the sandboxes' CPU limit (sandbox.cpus; default: 1, the tool's)")
    spend.add_argument("--runtime", help="the sandboxes' container runtime (sandbox.runtime), e.g. crun")
    spend.set_defaults(func=budget)
    life = commands.add_parser("lifecycle", help="a sandbox's life, layer by layer, against a bare container")
    life.add_argument("--runs", type=int, default=8)
    life.add_argument("--each", type=int, default=5, help="lives of each layer in a row, each round")
    life.add_argument("--runtime", help="the container runtime of every layer, e.g. crun")
    life.set_defaults(func=lifecycle)
    args = parser.parse_args()
    results = args.func(args)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
