"""The attack suite's harness: real runs of the real CLI, once per container runtime.

Every attack is a scripted model driving the agent's own tools (Bash, Read,
Write) against the sandbox. A test module runs its eval once per runtime
(module-scoped fixtures parametrized by `runtime`), its tests assert on what
the tools returned, on the run directory and on the host, and every run is
checked for leftovers by its run id. Measured numbers are collected into
`attack-facts.json` (in pytest's basetemp) and printed at the end, for
SECURITY.md.
"""

from __future__ import annotations

import json
import secrets
import shlex
import socket
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.docker_objects import objects_of_run
from tests.integration.e2e.conftest import EvalProject, RunResult

GVISOR = "runsc-nonet"
# runc and crun both run the sandbox on the host's kernel (sandbox/runtimes.py): the tool takes the
# same paths under both, so every attack proves the boundary holds under each.
RUNTIMES = ("runc", "crun", GVISOR)
INSTALLERS = {"crun": "scripts/install-crun.sh", GVISOR: "scripts/install-gvisor.sh"}
PROBES = Path(__file__).parent / "probes"
# Split so that no command, probe or prompt ever contains it whole: a hit means a leak.
NEEDLE_PARTS = ("ANSWER", "KEY")
NEEDLE = "".join(NEEDLE_PARTS)
SHELL_NEEDLE = "''".join(NEEDLE_PARTS)  # how a Bash command spells it

_FACTS: list[dict[str, Any]] = []


# ---- runtimes ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_runtimes() -> set[str]:
    return set(docker.from_env().info().get("Runtimes") or {})


@pytest.fixture(scope="session", params=RUNTIMES)
def runtime(request: pytest.FixtureRequest, docker_runtimes: set[str], sandbox_image: str) -> str:
    """Every attack runs under runc, crun and gVisor; a missing runtime fails, never skips."""
    name = str(request.param)
    if name not in docker_runtimes:
        pytest.fail(
            f"the container runtime {name!r} is not registered with Docker "
            f"(registered: {', '.join(sorted(docker_runtimes))}): run {INSTALLERS.get(name, 'scripts/setup.sh --test')}",
            pytrace=False,
        )
    return name


def is_gvisor(runtime: str) -> bool:
    return runtime == GVISOR


# ---- model script steps -------------------------------------------------------------


def bash(command: str, timeout_ms: int = 120_000) -> dict[str, Any]:
    return {"tool": "Bash", "input": {"command": command, "timeout": timeout_ms}}


def read(path: str) -> dict[str, Any]:
    return {"tool": "Read", "input": {"file_path": path}}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool": "Write", "input": {"file_path": path, "content": content}}


def final(text: str = "done") -> dict[str, Any]:
    return {"text": text}


def probe_steps(name: str, args: Any, timeout_ms: int = 120_000) -> list[dict[str, Any]]:
    """Write an in-container probe with the Write tool, then run it with Bash."""
    target = f"/workspace/.probe_{name}.py"
    source = (PROBES / f"{name}.py").read_text()
    return [write(target, source), bash(f"python3 {target} {shlex.quote(json.dumps(args))}", timeout_ms)]


# ---- what the agent saw -------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    name: str
    input: dict[str, Any]
    output: str
    is_error: bool


def calls(result: RunResult, case_id: str) -> list[Call]:
    """The root-level tool calls of a case with what each returned, in order."""
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    found: list[Call] = []
    for event in result.events(case_id):
        if event["type"] == "assistant" and not event.get("parent_tool_use_id"):
            for tool in event["tools"]:
                uses[tool["id"]] = (tool["name"], tool["input"])
        elif event["type"] == "tool_result" and event["tool_use_id"] in uses:
            name, tool_input = uses[event["tool_use_id"]]
            found.append(Call(name, tool_input, event["content"], event["is_error"]))
    return found


def records(output: str) -> list[dict[str, Any]]:
    """The `@@{json}` lines an in-container probe printed."""
    return [json.loads(line[2:]) for line in output.splitlines() if line.startswith("@@{")]


def by_probe(output: str) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records(output):
        grouped.setdefault(record["probe"], []).append(record)
    return grouped


def tagged(output: str, tag: str) -> list[str]:
    """`@@tag rest` lines a shell probe printed, as their rest."""
    prefix = f"@@{tag} "
    return [line[len(prefix):] for line in output.splitlines() if line.startswith(prefix)]


def all_case_text(case_dir: Path) -> str:
    """Everything the host holds for a case, as text (binary files too, decoded loosely)."""
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in case_dir.rglob("*") if p.is_file())


# ---- running and checking for leftovers ----------------------------------------------


@dataclass
class AttackRun:
    result: RunResult
    run_id: str
    runtime: str

    def entry(self, case_id: str) -> dict[str, Any]:
        return self.result.case_result(case_id)

    def calls(self, case_id: str) -> list[Call]:
        return calls(self.result, case_id)

    def output(self, case_id: str) -> str:
        return "\n".join(call.output for call in self.calls(case_id))


def new_run_id(label: str, runtime: str) -> str:
    return f"atk-{label}-{runtime}-{secrets.token_hex(3)}"


# dockerd's own containerd (Debian's docker.io), else a system-wide one.
CONTAINERD_SOCKETS = ("/run/docker/containerd/containerd.sock", "/run/containerd/containerd.sock")


def stray_tasks() -> set[str]:
    """containerd tasks Docker does not know: runsc can leave one (and its shim) behind
    that `docker ps -a` never shows, e.g. when a paused sandbox is removed."""
    address = next((path for path in CONTAINERD_SOCKETS if Path(path).exists()), None)
    assert address is not None, f"no containerd socket at {' or '.join(CONTAINERD_SOCKETS)}"
    api = docker.from_env().api

    def container_ids() -> set[str]:  # one list call: no per-container inspect to race a removal
        return {c["Id"] for c in api.containers(all=True, quiet=True)}

    # Docker's list before and after containerd's: other sessions' containers made or removed meanwhile
    # are known to one of them, so only tasks Docker never knew count.
    before = container_ids()
    listed = subprocess.run(["ctr", "--address", address, "-n", "moby", "tasks", "ls", "-q"],
                            capture_output=True, text=True, check=False, timeout=30)
    assert listed.returncode == 0, f"ctr cannot list containerd's tasks: {listed.stderr.strip()}"
    return set(listed.stdout.split()) - before - container_ids()


def host_processes_matching(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if marker in line and "ps -eo" not in line]


def run_attack(project: EvalProject, runtime: str, label: str, *args: str,
               env: dict[str, str] | None = None, timeout: float = 600, wrapper: tuple[str, ...] = ()) -> AttackRun:
    """Run the project's eval once under `runtime`, then prove nothing of it is left."""
    # The eval itself names the runtime (see write_eval): a run under the wrong one proves nothing.
    assert f"runtime: {runtime}" in (project.root / "eval.yaml").read_text()
    run_id = new_run_id(label, runtime)
    strays_before = stray_tasks()
    started = time.monotonic()
    result = project.run("--run-id", run_id, *args, env=env, timeout=timeout, wrapper=wrapper)
    wall = time.monotonic() - started
    assert result.process.returncode in (0, 1), result.process.stderr[-3000:]
    assert "Traceback" not in result.process.stderr, result.process.stderr[-3000:]
    assert objects_of_run(run_id) == [], f"{run_id} left Docker objects behind"
    assert stray_tasks() - strays_before == set(), f"{run_id} left containerd tasks behind"
    assert host_processes_matching(run_id) == []
    record_fact(f"{label}: run wall time", runtime, round(wall, 1), "s")
    return AttackRun(result, run_id, runtime)


def make_project(tmp_path_factory: pytest.TempPathFactory, label: str, runtime: str) -> EvalProject:
    return EvalProject(tmp_path_factory.mktemp(f"atk-{label}-{runtime}") / "project")


def write_eval(project: EvalProject, body: str, runtime: str, sandbox: str = "", tail: str = "") -> None:
    """eval.yaml: `body`, a `sandbox:` block naming the runtime under test (plus `sandbox`
    lines), then `tail`; each part is dedented on its own."""
    lines = [f"  runtime: {runtime}", *(f"  {line}" for line in textwrap.dedent(sandbox).strip().splitlines())]
    project.eval_yaml(textwrap.dedent(body) + "sandbox:\n" + "\n".join(lines) + "\n" + textwrap.dedent(tail))


# ---- measured facts -------------------------------------------------------------------


def record_fact(what: str, runtime: str, value: Any, unit: str = "") -> None:
    """Note a measured number for SECURITY.md (printed at the end, kept in attack-facts.json)."""
    _FACTS.append({"what": what, "runtime": runtime, "value": value, "unit": unit})


@pytest.fixture(scope="session", autouse=True)
def _write_facts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    if _FACTS:
        path = tmp_path_factory.getbasetemp() / "attack-facts.json"
        path.write_text(json.dumps(_FACTS, indent=1))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FACTS:
        return
    terminalreporter.section("attack suite: measured facts")
    for fact in sorted(_FACTS, key=lambda f: (f["what"], f["runtime"])):
        terminalreporter.write_line(f"{fact['what']} [{fact['runtime']}]: {fact['value']} {fact['unit']}".rstrip())


# ---- listeners of the test's own on the host ----------------------------------------------


class UdpListeners:
    """UDP sockets on the given host addresses that record every datagram."""

    def __init__(self, addresses: list[str]) -> None:
        self.sockets: list[socket.socket] = []
        for address in addresses:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((address, 0))
            sock.settimeout(0.5)
            self.sockets.append(sock)
        self.targets: list[tuple[str, int]] = [s.getsockname()[:2] for s in self.sockets]
        self.received: list[tuple[str, int]] = []
        for sock in self.sockets:
            threading.Thread(target=self._receive, args=(sock,), daemon=True).start()

    def _receive(self, sock: socket.socket) -> None:
        while True:
            try:
                _, peer = sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.received.append(peer)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


class AbstractUnixListener:
    """A listener in the host's abstract unix namespace, which belongs to its network namespace."""

    def __init__(self) -> None:
        self.name = f"agent-eval-attack-{secrets.token_hex(4)}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind("\0" + self.name)
        self.sock.listen()
        self.sock.settimeout(0.5)
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()
