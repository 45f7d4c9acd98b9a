"""The skill under test tries to take the controller down, so that its neighbours' results are lost.

- A file named with a byte that is not UTF-8 (`notes-\\xff.txt`) once crashed
  the writing of workspace.diff: exit 3, no report, the next case never ran.
- 240 MiB of text under artifacts/ once took the controller to ~2.5 GiB and
  the judge worker to ~2.2 GiB of memory: collection streams and the judges'
  record is capped per file and in total.
- If the controller dies anyway (kill -9), no sandbox keeps running: each
  stops itself when its controller is gone.
(Socket floods against the gateway and the broker are in test_attack_budget.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker
import pytest

from agent_eval_sandbox.sandbox import labels as L
from tests.docker_objects import containers_of_run, objects_of_run

from .conftest import (
    AttackRun,
    bash,
    final,
    make_project,
    new_run_id,
    record_fact,
    run_attack,
    write_eval,
)

pytestmark = pytest.mark.docker

MiB = 1024 * 1024
FLOOD_MIB = 240
BAD_NAME = "notes-\\377.txt"  # printf spelling of the byte 0xff
# 48 files of 5 MiB of text: each over the record's per-file cap, together far over its total.
FLOOD = (f"mkdir -p artifacts && for i in $(seq 1 {FLOOD_MIB // 5}); do "
         "python3 -c \"import sys; sys.stdout.write(('lorem ipsum dolor ' * 64 + chr(10)) * 4551)\" "
         "> artifacts/flood-$i.txt; done; du -sm artifacts | sed 's/^/@@du /'")
CHECK_FILES = 'return (len(outputs["files"]), f"{len(outputs[\'files\'])} files")'


def _eval(project, runtime: str) -> None:
    write_eval(project, f"""
        name: attack-dos
        execution: {{prompt: "{{q}}", timeout: 300, parallelism: 1}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases}}
        outputs: [{{path: artifacts}}]
        judges:
          - name: sees_files
            check: |
              {CHECK_FILES}
    """, runtime)


# ---- names that are not UTF-8 -----------------------------------------------------------


@pytest.fixture(scope="module")
def names_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "dos-names", runtime)
    _eval(project, runtime)
    plant = (f"mkdir -p artifacts && printf 'x\\n' > \"$(printf '{BAD_NAME}')\" && "
             f"printf 'y\\n' > \"artifacts/$(printf '{BAD_NAME}')\" && ls | od -c | head -3")
    project.case("a-bad-names", {"q": "names"}, script=[bash(plant), final("planted")])
    project.case("b-neighbour", {"q": "next"}, script=[bash("mkdir -p artifacts && echo ok > artifacts/ok.txt"),
                                                        final("neighbour done")])
    return run_attack(project, runtime, "dos-names", "--offline")


def test_a_name_that_is_not_utf8_ends_nothing(names_run: AttackRun) -> None:
    result = names_run.result
    assert result.process.returncode == 0, result.process.stderr[-2000:]
    assert (result.run_dir / "report.html").is_file() and (result.run_dir / "summary.json").is_file()
    bad = names_run.entry("a-bad-names")
    assert bad["end_reason"] == "exited" and bad["exit_code"] == 0, bad
    assert names_run.entry("b-neighbour")["result"] == "neighbour done"


def test_the_name_is_carried_through_as_its_own_bytes(names_run: AttackRun) -> None:
    case = names_run.result.case("a-bad-names")
    raw = os.fsencode(os.fsdecode(b"notes-\xff.txt"))
    assert raw in (case / "workspace.diff").read_bytes()
    assert (case / "artifacts" / os.fsdecode(b"notes-\xff.txt")).read_bytes() == b"y\n"
    # In JSON the byte travels as the escape that reads back as the same name.
    assert os.fsdecode(b"notes-\xff.txt") in names_run.entry("a-bad-names")["changes"]["added"]
    summary = json.loads((names_run.result.run_dir / "summary.json").read_text())
    # artifacts/<name>, and the two new files under _modified/
    assert summary["per_case"]["a-bad-names"]["sees_files"]["value"] == 3


# ---- a flood of text --------------------------------------------------------------------


# The CLI in a process that reports its own peak memory at exit (exact, however brief the peak).
_MEASURED_CLI = (
    "import atexit, resource, runpy, sys\n"
    "def report():\n"
    "    print(f'@@rss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr, flush=True)\n"
    "atexit.register(report)\n"
    "sys.argv = ['agent-eval-sandbox', *sys.argv[1:]]\n"
    "runpy.run_module('agent_eval_sandbox', run_name='__main__')\n"
)


def _worker_peaks(stop: threading.Event, peaks: dict[str, int]) -> None:
    """The judge workers' own high-water marks, sampled while they live (they live through all scoring)."""
    while not stop.is_set():
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                if b"agent_eval_sandbox.judges._worker" not in (status.parent / "cmdline").read_bytes():
                    continue
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks["judge_worker"] = max(peaks["judge_worker"], int(line.split()[1]))
            except (OSError, ValueError):
                continue
        stop.wait(0.005)


def _run_watching_memory(project, runtime: str, label: str) -> tuple[subprocess.CompletedProcess[str], str, dict[str, int]]:
    """Run the eval in a child process that reports its own peak memory; sample the judge workers' (KiB)."""
    run_id = new_run_id(label, runtime)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    peaks = {"controller": 0, "judge_worker": 0}
    stop = threading.Event()
    watcher = threading.Thread(target=_worker_peaks, args=(stop, peaks), daemon=True)
    watcher.start()
    try:
        process = subprocess.run(
            [sys.executable, "-c", _MEASURED_CLI, "run", str(project.root / "eval.yaml"), "--offline", "--json",
             "--runs-dir", str(project.runs), "--run-id", run_id],
            capture_output=True, text=True, env=env, cwd=project.root, timeout=900,
        )
    finally:
        stop.set()
        watcher.join()
    line = next(line for line in process.stderr.splitlines() if line.startswith("@@rss "))
    peaks["controller"] = int(line.split()[1])
    return process, run_id, peaks


@pytest.fixture(scope="module")
def flood_run(tmp_path_factory: pytest.TempPathFactory, runtime: str):
    project = make_project(tmp_path_factory, "dos-flood", runtime)
    _eval(project, runtime)
    project.case("a-flood", {"q": "flood"}, script=[bash(FLOOD, timeout_ms=600_000), final("flooded")])
    project.case("b-neighbour", {"q": "next"}, script=[bash("mkdir -p artifacts && echo ok > artifacts/ok.txt"),
                                                        final("neighbour done")])
    process, run_id, peaks = _run_watching_memory(project, runtime, "dos-flood")
    assert objects_of_run(run_id) == []
    run_dir = Path(json.loads(process.stdout)["run_dir"]) if process.stdout.startswith("{") else None
    return process, run_dir, peaks, runtime


def test_a_flood_of_text_keeps_the_controller_and_the_judges_small(flood_run) -> None:
    process, run_dir, peaks, runtime = flood_run
    assert process.returncode == 0, process.stderr[-2000:]
    assert run_dir is not None and (run_dir / "report.html").is_file()
    flood = json.loads((run_dir / "cases" / "a-flood" / "run_result.json").read_text())
    assert flood["end_reason"] == "exited", flood
    written = sum(p.stat().st_size for p in (run_dir / "cases" / "a-flood" / "artifacts").iterdir())
    assert written >= 200 * MiB  # the flood did happen, and was collected whole
    controller_mib, worker_mib = peaks["controller"] // 1024, peaks["judge_worker"] // 1024
    record_fact("dos: peak RSS of the controller with 240 MiB of artifacts", runtime, controller_mib, "MiB")
    record_fact("dos: peak RSS of the judge worker with 240 MiB of artifacts", runtime, worker_mib, "MiB")
    assert 0 < controller_mib < 400, peaks
    assert 0 < worker_mib < 250, peaks
    # the judge saw every file, with the caps' markers, and the neighbour was judged too
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["per_case"]["a-flood"]["sees_files"]["value"] >= 48
    assert summary["per_case"]["b-neighbour"]["sees_files"]["value"] == 2
    diff = (run_dir / "cases" / "a-flood" / "workspace.diff").stat().st_size
    assert diff <= 17 * MiB, diff


# ---- the controller is killed --------------------------------------------------------------


def test_sandboxes_stop_by_themselves_when_the_controller_is_killed(tmp_path_factory: pytest.TempPathFactory,
                                                                     runtime: str) -> None:
    project = make_project(tmp_path_factory, "dos-kill", runtime)
    _eval(project, runtime)
    project.case("a-sleeper", {"q": "sleep"}, script=[bash("echo sleeping && sleep 9999", timeout_ms=600_000), final("never")])
    run_id = new_run_id("dos-kill", runtime)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline",
         "--runs-dir", str(project.runs), "--run-id", run_id],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=project.root,
    )
    client = docker.from_env()
    label = {"label": f"{L.RUN_ID}={run_id}"}
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not containers_of_run(run_id, running_only=True):
            time.sleep(0.2)
        assert containers_of_run(run_id, running_only=True), "the run never started its sandbox"
        time.sleep(3)  # the agent is in its sleep
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        killed = time.monotonic()
        while containers_of_run(run_id, running_only=True) and time.monotonic() - killed < 20:
            time.sleep(0.2)
        stopped_after = time.monotonic() - killed
        assert containers_of_run(run_id, running_only=True) == [], "a sandbox kept running without its controller"
        record_fact("dos: a killed controller's sandbox stopped itself after", runtime, round(stopped_after, 1), "s")
    finally:
        if proc.poll() is None:
            proc.kill()
        for container in client.containers.list(all=True, filters=label, ignore_removed=True):
            container.remove(force=True, v=True)
        for volume in client.volumes.list(filters=label):
            volume.remove(force=True)
