"""A whole run (app/run.py: execute_run) on the fake sandbox backend: the real gateway, the offline
scripted model, hooks, judges and reports, and an image step that needs no Docker."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from agent_eval_sandbox.app.run import RunOutcome, RunRequest, execute_run
from agent_eval_sandbox.app.score import score_run
from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.errors import RuntimeNotRegisteredError
from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner import case
from agent_eval_sandbox.runner.plan import plan_invocations
from agent_eval_sandbox.sandbox.base import SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.fake import ExecCall, FakeBackend, Hang, Reply
from agent_eval_sandbox.sandbox.held_dirs import HeldDir
from agent_eval_sandbox.sandbox.image import ImageSettings, SandboxImage
from tests.unit.runner.fake_cli import FakeCli, is_agent
from tests.unit.runner.pipeline_fixture import Project

JUDGED = """
sandbox: {image: "prebuilt:1"}
hooks:
  before_all:
    - command: 'printf "env: {SUITE_TOKEN: s-1}\\ndata: {suite: s1}\\n" > "$AGENT_EVAL_WORKSPACE/.hook-outputs.yaml"'
judges:
  - name: wrote_hello
    check: |
      texts = [str(t) for t in outputs.get("files", {}).values()]
      return any(t.startswith("hi from") for t in texts), f"{len(texts)} file(s)"
thresholds:
  wrote_hello: {min_pass_rate: 1.0}
"""


class ImageStep:
    """Readies no image: the one eval.yaml names, as `docker_image` would for a prebuilt one."""

    def __init__(self) -> None:
        self.asked: list[tuple[ImageSettings, bool]] = []

    def __call__(self, settings: ImageSettings, rebuild: bool, console: Console) -> SandboxImage:
        self.asked.append((settings, rebuild))
        return SandboxImage(ref=settings.image or "fake-built", built=False)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "project")


@pytest.fixture
def cli() -> FakeCli:
    return FakeCli()


@pytest.fixture
def backend(cli: FakeCli) -> Iterator[FakeBackend]:
    with FakeBackend(cli) as fake:
        yield fake


def _request(project: Project, run_id: str = "r1") -> RunRequest:
    loaded = load_eval_config(project.root / "eval.yaml")
    dataset = load_dataset(loaded)
    settings = resolve_run_settings(loaded.config, CliOverrides(), num_cases=len(dataset.cases))
    return RunRequest(loaded=loaded, dataset=dataset, settings=settings,
                      invocations=plan_invocations(loaded.config, dataset.cases, settings),
                      runs_base=project.root / "runs", run_id=run_id, offline=True)


def _execute(project: Project, backend: FakeBackend, images: ImageStep) -> tuple[RunOutcome, str]:
    err = io.StringIO()
    outcome = execute_run(_request(project), err_console=Console(file=err, soft_wrap=True, width=200),
                          show_progress=False, backend=backend, image_step=images)
    return outcome, err.getvalue()


def test_a_whole_run_on_the_fake_backend_is_run_collected_judged_and_cleaned_up(project, backend, cli):
    project.eval_yaml(JUDGED)
    project.case("c1")
    project.case("c2")
    suite_tokens: list[str | None] = []
    cli.before = lambda call: suite_tokens.append(call.env.get("SUITE_TOKEN"))
    images = ImageStep()
    outcome, err = _execute(project, backend, images)

    result = outcome.result
    assert result.num_cases == 2 and result.exit_code == 0
    assert result.end_reasons == {"c1": "exited", "c2": "exited"}
    run_dir = outcome.run_dir
    assert json.loads(run_dir.run_result.read_text()) == result.to_data()
    assert json.loads(run_dir.run_json.read_text())["image"] == "prebuilt:1"
    assert [(s.image, rebuild) for s, rebuild in images.asked] == [("prebuilt:1", False)]
    assert suite_tokens == ["s-1", "s-1"]  # before_all's env reached every agent
    assert "suite: s1" in run_dir.hook_outputs.read_text()
    for case_id in ("c1", "c2"):
        assert (run_dir.case(case_id).path / "out" / "hello.txt").read_text() == f"hi from {case_id}"
    # judged and reported
    assert outcome.score is not None and outcome.score.exit_code == 0
    verdicts = outcome.score.summary.per_case
    assert {case: verdicts[case]["wrote_hello"].value for case in ("c1", "c2")} == {"c1": True, "c2": True}
    assert run_dir.summary_yaml.is_file()
    # nothing left: every sandbox destroyed, the staging directory (the cases' sockets) removed
    assert [s.spec.image for s in backend.created] == ["prebuilt:1", "prebuilt:1"]
    assert backend.live == [] and backend.reaped == []
    channel_dirs = [m.source for s in backend.created for m in s.spec.mounts if m.target == paths.RUN_DIR]
    assert len(channel_dirs) == 2 and not any(d.exists() for d in channel_dirs)
    assert "hook before_all.0:" in err


def test_the_run_reaps_dead_runs_sandboxes_first_and_leaves_live_ones_alone(project, backend):
    project.eval_yaml()
    project.case("c1")
    now = time.time()
    stale = backend.create(SandboxSpec(image="old", run_id="dead-run", case_id="x", deadline_epoch=now - 10_000))
    other = backend.create(SandboxSpec(image="new", run_id="other-run", case_id="y", deadline_epoch=now + 3600))
    outcome, err = _execute(project, backend, ImageStep())

    assert outcome.result.end_reasons == {"c1": "exited"}
    assert stale.destroyed and [r.name for r in backend.reaped] == [stale.name]
    assert f"removed orphaned sandbox {stale.name} (deadline passed)" in err
    assert not other.destroyed and backend.live == [other]  # another run's sandbox is not this run's to remove


def test_the_run_removes_the_working_directories_a_killed_run_left_and_leaves_live_ones(project, backend,
                                                                                        monkeypatch):
    tmp = Path(tempfile.mkdtemp(prefix="ut-", dir="/tmp"))  # short: the run binds its sockets under it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    try:
        project.eval_yaml()
        project.case("c1")
        live = HeldDir(tmp, "aes-ll-")
        killed = subprocess.run(  # a run killed with SIGKILL: its lock is free, its directories stay
            [sys.executable, "-c", "import os, sys; from pathlib import Path;"
             "from agent_eval_sandbox.sandbox.held_dirs import HeldDir;"
             "d = HeldDir(Path(sys.argv[1]), 'aes-'); (d.path / 'prompt.txt').write_text('x'); print(d.path, flush=True);"
             "os.kill(os.getpid(), 9)", str(tmp)], capture_output=True, text=True)
        left = Path(killed.stdout.strip())
        assert killed.returncode == -signal.SIGKILL and (left / "prompt.txt").exists()

        outcome, err = _execute(project, backend, ImageStep())

        assert outcome.result.end_reasons == {"c1": "exited"}
        assert f"removed abandoned directory {left} (the process that made it is gone)" in err
        assert not left.exists() and live.path.is_dir()
        live.release()
        assert list(tmp.iterdir()) == []  # and the run's own went with it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_runtime_the_backend_lacks_stops_the_run_before_anything_is_made(project, backend):
    project.eval_yaml("sandbox: {runtime: runsc-missing}")
    project.case("c1")
    images = ImageStep()
    with pytest.raises(RuntimeNotRegisteredError, match="runsc-missing"):
        _execute(project, backend, images)
    assert images.asked == [] and backend.created == [] and not (project.root / "runs").exists()


def test_eval_yaml_cannot_choose_the_fake_backend(project):
    """The fake confines nothing: it is never a backend name, whatever eval.yaml says."""
    project.eval_yaml("sandbox: {backend: fake}")
    project.case("c1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(project.root / "eval.yaml"), "--offline",
         "--runs-dir", str(project.root / "runs")],
        capture_output=True, text=True, timeout=120, env=env, cwd=project.root,
    )
    assert process.returncode == 2, process.stderr
    assert "unknown sandbox backend 'fake'" in process.stderr and "use one of: docker" in process.stderr
    assert "Traceback" not in process.stderr
    assert not (project.root / "runs").exists()


def test_an_agent_given_the_fake_backend_sees_only_its_own_sandbox(project, backend, cli):
    """Each case's fake filesystem is its own: what one agent writes, the next does not find."""
    project.eval_yaml()
    project.case("c1")
    project.case("c2")
    found: dict[str, list[str]] = {}

    def look(call: ExecCall) -> None:
        found[call.sandbox.spec.case_id] = sorted(p.name for p in call.host_path(".").iterdir())
        call.write(f"left-by-{call.sandbox.spec.case_id}.txt", "x")

    cli.before = look
    _execute(project, backend, ImageStep())
    assert found["c1"] == found["c2"] == ["input.yaml", "out", "seed.txt"]


# ---- interrupted runs and infrastructure errors ---------------------------------------------------


def test_ctrl_c_mid_run_records_what_finished_and_marks_the_run_interrupted(project, backend, cli):
    project.eval_yaml(JUDGED)
    for case_id in ("c1", "c2", "c3"):
        project.case(case_id)

    def second_case_interrupts(call: ExecCall) -> Reply | Hang:
        if is_agent(call) and call.sandbox.spec.case_id == "c2":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            return Hang()  # only the removal of its sandbox ends it
        return cli(call)

    backend.behaviour = second_case_interrupts
    outcome, err = _execute(project, backend, ImageStep())

    assert outcome.interrupted_exit == 130 and outcome.score is None  # not judged after Ctrl-C
    result = json.loads(outcome.run_dir.run_result.read_text())
    assert (result["interrupted"], result["planned"], result["finished"]) == (True, 3, 1)
    assert result["end_reasons"] == {"c1": "exited", "c2": "interrupted", "c3": "interrupted"}
    assert json.loads(outcome.run_dir.case("c3").result.read_text())["end_reason"] == "interrupted"
    assert backend.live == []
    # judged afterwards, the planned denominator stays and no interrupted case passes
    scored = score_run(outcome.run_dir.root)
    stats = scored.summary.judges["wrote_hello"]
    assert stats.pass_rate == pytest.approx(1 / 3) and stats.not_run_cases == 2
    assert [scored.summary.per_case[c]["wrote_hello"].status for c in ("c2", "c3")] == ["not_run", "not_run"]
    assert scored.summary.cases.interrupted and scored.exit_code == 1
    assert any(line.startswith("INTERRUPTED: 1 of 3 cases finished") for line in scored.text_lines())


def test_a_sandbox_that_never_starts_is_an_infra_error_and_the_run_exits_4(project, backend, monkeypatch):
    monkeypatch.setattr(case, "CREATE_RETRY_DELAYS_S", (0.0, 0.0))
    project.eval_yaml(JUDGED)
    project.case("c1")
    project.case("c2")

    def c2_never_starts(spec: SandboxSpec) -> None:
        if spec.case_id == "c2":
            raise SandboxError("sandbox did not start: its main process never reached the controller")

    backend.on_create = c2_never_starts
    outcome, _ = _execute(project, backend, ImageStep())
    assert outcome.result.end_reasons == {"c1": "exited", "c2": "infra_error"}
    assert outcome.score is not None and outcome.score.exit_code == 4
    assert outcome.score.summary.per_case["c2"]["wrote_hello"].status == "not_run"
    assert outcome.score.summary.cases.infra_errors == 1
