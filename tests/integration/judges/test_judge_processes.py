"""Judge code in real worker processes: whatever it does costs only its own sample."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.judges.worker_pool import JudgeWorker, WorkerPool, encode_json
from tests.unit.judges.rundir_fixture import case_result, make_project, make_run


def _check(worker: JudgeWorker, source: str, outputs: dict | None = None, timeout_s: float = 5.0):
    spec = encode_json({"kind": "check", "name": "t", "source": source})
    return worker.call(spec, b"{}", encode_json(outputs or {"n": 1}), timeout_s)


@pytest.fixture
def worker(tmp_path: Path):
    pool = WorkerPool(tmp_path)
    with pool, pool.worker() as w:
        yield w


def test_a_hanging_judge_is_killed_at_its_time_limit_and_the_next_sample_runs(worker: JudgeWorker) -> None:
    started = time.monotonic()
    sample = _check(worker, "while True: pass", timeout_s=1.0)
    assert time.monotonic() - started < 4
    assert sample.error == "the judge did not finish within 1s and was killed"
    assert _check(worker, "return outputs['n'] + 1, 'after'").value == 2


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("import os\nos._exit(3)", "the judge process exited with code 3"),
        ("import ctypes\nctypes.string_at(0)", "the judge process was killed by SIGSEGV"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "the judge process was killed by SIGKILL"),
        ("raise RuntimeError('judge bug')", "RuntimeError: judge bug (check line 1)"),
        ("return object(), 'x'", "the judge returned a value that is not JSON-serialisable: object"),
        # not coerced to a number, and not passed off as an internal error of ours
        ("return '3', 'x'", "the judge returned str '3'; a judge's value is a bool or a number"),
        ("return 'high', 'x'", "the judge returned str 'high'; a judge's value is a bool or a number"),
    ],
)
def test_crashes_and_bad_values_error_only_their_sample(worker: JudgeWorker, source: str, error: str) -> None:
    assert (_check(worker, source).error or "").startswith(error)
    assert _check(worker, "return True, 'still alive'").value is True


def test_stderr_of_a_dying_judge_is_quoted(worker: JudgeWorker) -> None:
    sample = _check(worker, "import os, sys\nsys.stderr.write('disk is full\\n'); sys.stderr.flush()\nos._exit(9)")
    assert sample.error == "the judge process exited with code 9; stderr: disk is full"


def test_garbage_on_stdout_and_reads_of_stdin_do_not_disturb_the_protocol(worker: JudgeWorker) -> None:
    source = (
        "import os, sys\n"
        "print('{\"id\": 999, \"ok\": true, \"value\": false}')\n"
        "os.write(1, b'raw garbage\\n\\x00\\xff')\n"
        "data = sys.stdin.read()\n"
        "return True, f'stdin had {len(data)} bytes'"
    )
    sample = _check(worker, source)
    assert (sample.value, sample.rationale, sample.error) == (True, "stdin had 0 bytes", None)


def test_children_of_a_hanging_judge_are_killed_too(worker: JudgeWorker, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    source = (
        "import subprocess\n"
        f"child = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "while True: pass"
    )
    assert "did not finish" in (_check(worker, source, timeout_s=1.0).error or "")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie waiting for its reaper is dead


def test_a_large_record_crosses_the_pipe(worker: JudgeWorker) -> None:
    big = "x" * (8 * 1024 * 1024)
    assert _check(worker, "return len(outputs['big']), 'size'", {"big": big}).value == len(big)


EVAL = """
name: procs
dataset: {path: dataset}
outputs: [{path: artifacts}]
judges:
  - name: hang
    check: |
      while True: pass
  - name: fine
    check: |
      return bool(outputs.get("artifacts_content")), "has an artifact"
  - name: external
    module: eval_judges.quality
    function: grade
    arguments: {minimum: 2}
    score_range: [0, 10]
  - name: budget
    builtin: cost_budget
    arguments: {max_cost_usd: 0.07}
  - name: tools
    builtin: process/tool_call_validation
thresholds:
  fine: {min_pass_rate: 1.0}
  hang: {max_error_rate: 0.0}
"""

JUDGE_MODULE = """
from eval_judges.helpers import words


def grade(outputs, minimum=0):
    n = words(outputs.get("artifacts_content", ""))
    return n, f"{n} words (minimum {minimum})"
"""


def test_score_run_time_limits_each_sample_and_imports_from_the_project_root(tmp_path: Path) -> None:
    config = make_project(tmp_path, EVAL, {f"c{i}": {} for i in range(3)}, extra={
        "eval_judges/__init__.py": "",
        "eval_judges/helpers.py": "def words(text):\n    return len(text.split())\n",
        "eval_judges/quality.py": JUDGE_MODULE,
    })
    cases = {f"c{i}": {"run_result.json": case_result(cost_usd=0.05 * i), "artifacts/out.md": "one two three " * i} for i in range(3)}
    run = make_run(tmp_path, config, cases)
    started = time.monotonic()
    result = score_run(run, judge_timeout_s=1.0, parallelism=1)
    assert time.monotonic() - started < 30
    per_case = result.summary.per_case
    assert all(per_case[c]["hang"].error == "the judge did not finish within 1s and was killed" for c in cases)
    assert [per_case[c]["fine"].value for c in sorted(cases)] == [False, True, True]
    assert [per_case[c]["external"].value for c in sorted(cases)] == [0, 3, 6]
    assert [per_case[c]["budget"].value for c in sorted(cases)] == [True, True, False]
    # no tool calls in these cases: nothing to judge, which is not a pass
    assert all(per_case[c]["tools"].status == "error" and per_case[c]["tools"].value is None
               and (per_case[c]["tools"].error or "").startswith("nothing to judge:") for c in cases)
    assert result.exit_code == 1
    assert [c.line() for c in result.summary.thresholds.regressions] == [
        "[fine] pass_rate: >= 1.0 -> 0.6667",
        "[hang] error_rate: <= 0.0 -> 1.0   error_rate unavailable — judge errored on 3 cases; see the per-case "
        "rationales",
    ]


def test_no_worker_outlives_scoring(tmp_path: Path) -> None:
    config = make_project(tmp_path, "name: w\ndataset: {path: dataset}\njudges:\n  - name: ok\n    check: \"return True, ''\"\n", {"c": {}})
    run = make_run(tmp_path, config, {"c": {}})
    before = _workers()
    score_run(run)
    assert _workers() == before


def _workers() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"agent_eval_sandbox.judges._worker" in cmdline and os.getpid() != int(entry.name):
                state = (entry / "status").read_text() if (entry / "status").exists() else ""
                if "\nState:\tZ" not in state:
                    found.add(int(entry.name))
    return found


def test_a_closed_pool_starts_no_more_workers(tmp_path: Path) -> None:
    pool = WorkerPool(tmp_path)
    with pool.worker() as worker:
        assert _check(worker, "return True, ''").value is True
    pool.close()
    with pytest.raises(RuntimeError, match="closed"), pool.worker():
        pass
