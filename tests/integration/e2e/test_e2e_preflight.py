"""`run --offline` refuses a broken model script before any sandbox starts (real Docker, real CLI).

Before the preflight, a typo in a model-script step ran the case, which ended
`error (0.0s)` with the reason only in its stderr.log. The proof that nothing
started is the daemon's own event log: no container of the run's id was
created; the same query finds the containers of a sound run (the control).
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox.docker_errors import connect
from agent_eval_sandbox.sandbox.labels import RUN_ID

pytestmark = pytest.mark.docker

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "broken_evals"


def _run(root: Path, run_id: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """`run --offline` of the eval at root; the process and how many containers the daemon created for it.

    The events are watched live while the run goes on: the daemon keeps only its last few
    hundred events for a later query, and other tests on this machine make many."""
    stream = connect().events(decode=True, filters={"type": "container", "event": "create",
                                                    "label": f"{RUN_ID}={run_id}"})
    created: list[dict[str, object]] = []

    def watch() -> None:
        with contextlib.suppress(Exception):  # closing the stream ends the iteration with an error
            created.extend(stream)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "agent_eval_sandbox", "run", str(root / "eval.yaml"), "--offline",
             "--runs-dir", str(root / "runs"), "--run-id", run_id],
            capture_output=True, text=True, timeout=600, cwd=root,
        )
        time.sleep(1)  # let the daemon deliver the last events
    finally:
        stream.close()
        watcher.join(timeout=10)
    return process, len(created)


def test_a_model_script_typo_fails_before_any_sandbox_names_case_step_and_key(tmp_path, sandbox_image):
    broken = tmp_path / "script-typo"
    shutil.copytree(FIXTURES / "script-typo", broken)
    process, created = _run(broken, f"typo-{secrets.token_hex(4)}")
    assert process.returncode == 2, process.stderr
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert errors == [process.stderr.rstrip().splitlines()[-1]] and "Traceback" not in process.stderr
    assert errors[0].startswith(f"error: case c1: {broken}/cases/c1/model_script.yaml: steps[0] (step 1): "
                                "unknown key 'tol' (did you mean 'tool'?)")
    assert created == 0 and not (broken / "runs").exists()

    # The control: the same eval with a sound script starts its sandbox, runs and passes.
    sound = tmp_path / "sound"
    shutil.copytree(FIXTURES / "sound", sound)
    process, created = _run(sound, f"sound-{secrets.token_hex(4)}")
    assert process.returncode == 0, process.stderr
    assert created >= 1
