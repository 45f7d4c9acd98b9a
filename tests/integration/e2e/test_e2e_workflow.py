"""The everyday loop on real runs (real Docker, the real CLI, scripted models): init, selection,
latest, runs, show, rerun-failed, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.docker


def cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENT_EVAL_RUNS_DIR"))}
    return subprocess.run([sys.executable, "-m", "agent_eval_sandbox", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def test_init_then_run_offline_passes(tmp_path: Path) -> None:
    made = cli("init", "starter", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    root = tmp_path / "starter"
    ran = cli("run", "--offline", "--json", cwd=root)
    assert ran.returncode == 0, ran.stderr
    run_dir = root / json.loads(ran.stdout)["run_dir"]
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    assert summary["thresholds"]["passed"] is True
    assert sorted(summary["per_case"]) == ["001-shopping", "002-reading"]
    for verdicts in summary["per_case"].values():
        assert all(v["value"] is True for v in verdicts.values()), verdicts
    again = cli("init", "starter", cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "exists already" in again.stderr


def _run_dir(process: subprocess.CompletedProcess[str], root: Path) -> Path:
    return root / json.loads(process.stdout)["run_dir"]


def _starter(tmp_path: Path) -> Path:
    assert cli("init", "starter", cwd=tmp_path).returncode == 0
    return tmp_path / "starter"


def test_selection_latest_runs_and_show(tmp_path: Path) -> None:
    root = _starter(tmp_path)
    one = cli("run", "--offline", "--json", "--case", "*reading", cwd=root)
    assert one.returncode == 0, one.stderr
    run_dir = _run_dir(one, root)
    assert sorted(json.loads(one.stdout)["run_result"]["per_case"]) == ["002-reading"]
    assert (run_dir.parent / "latest").resolve() == run_dir.resolve()
    limited = cli("run", "--offline", "--json", "--limit", "1", cwd=root)
    assert sorted(json.loads(limited.stdout)["run_result"]["per_case"]) == ["001-shopping"]
    assert (run_dir.parent / "latest").resolve() == _run_dir(limited, root).resolve()
    # show: the conversation of the newest run's only case, as the sandbox had it
    shown = cli("show", "latest", "--json", cwd=root)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["case"] == "001-shopping" and view["end_reason"] == "exited"
    assert [t["name"] for e in view["events"] if e["type"] == "assistant" for t in e["tools"]] == ["Bash"]
    assert view["judges"]["note_written"]["value"] is True
    text = cli("show", str(run_dir), "002-reading", cwd=root)
    assert text.returncode == 0, text.stderr
    for expected in ("tool call Write", "result of Write", "Wrote notes/note.md.", "end reason: exited",
                     "note_written"):
        assert expected in text.stdout, text.stdout
    listed = json.loads(cli("runs", "--json", cwd=root).stdout)
    assert [row["run_dir"] for row in listed] == [str(_run_dir(limited, root).relative_to(root)),
                                                 str(run_dir.relative_to(root))]
    assert all(row["verdict"] == "pass" and row["cases"] == 1 for row in listed)
    assert cli("runs", cwd=root).returncode == 0
    # score and report take `latest` too
    assert cli("report", "latest", cwd=root).returncode == 0


def test_exit_first_stops_after_a_case_that_did_not_complete(tmp_path: Path) -> None:
    root = _starter(tmp_path)
    # The scripted turn costs more than this budget: the first case is stopped, the second never starts.
    ran = cli("run", "--offline", "--json", "-x", "--max-budget", "0.01", cwd=root)
    assert ran.returncode == 1, ran.stderr
    per_case = json.loads(ran.stdout)["run_result"]["per_case"]
    assert per_case["001-shopping"]["end_reason"] == "budget_exhausted"
    assert per_case["002-reading"]["end_reason"] == "interrupted"
    assert per_case["002-reading"]["ran"] is False and "exit-first" in per_case["002-reading"]["error"]


def test_rerun_failed_after_a_regression(tmp_path: Path) -> None:
    root = _starter(tmp_path)
    assert cli("run", "--offline", "--json", cwd=root).returncode == 0
    script = root / "cases" / "002-reading" / "model_script.yaml"
    good = script.read_text()
    script.write_text(good.replace("Finish chapter three", "Skim chapter one"))  # the regression
    broken = cli("run", "--offline", "--json", cwd=root)
    assert broken.returncode == 1, broken.stderr
    broken_dir = _run_dir(broken, root)
    again = cli("run", "--offline", "--json", "--rerun-failed", "latest", cwd=root)
    assert again.returncode == 1, again.stderr
    assert sorted(json.loads(again.stdout)["run_result"]["per_case"]) == ["002-reading"]
    meta = json.loads((_run_dir(again, root) / "run.json").read_text())
    assert meta["rerun_of"] == str(broken_dir.resolve())
    script.write_text(good)  # fixed
    fixed = cli("run", "--offline", "--json", "--rerun-failed", str(broken_dir), cwd=root)
    assert fixed.returncode == 0, fixed.stderr
    assert sorted(json.loads(fixed.stdout)["run_result"]["per_case"]) == ["002-reading"]
    nothing = cli("run", "--offline", "--rerun-failed", "latest", cwd=root)
    assert nothing.returncode == 0 and "nothing to rerun" in nothing.stderr


def test_resume_after_a_real_ctrl_c(tmp_path: Path) -> None:
    root = _starter(tmp_path)
    eval_yaml = root / "eval.yaml"
    # A third case that sleeps until its deadline: Ctrl-C comes while it runs.
    eval_yaml.write_text(eval_yaml.read_text().replace("timeout: 120", "timeout: 25"))
    slow = root / "cases" / "003-slow"
    slow.mkdir()
    (slow / "input.yaml").write_text("title: Slow\nline: Wait\n")
    (slow / "annotations.yaml").write_text("expected: Wait\n")
    # Not `sleep`: the CLI's Bash tool refuses a long leading sleep at once, and the case would end in seconds.
    (slow / "model_script.yaml").write_text(yaml.safe_dump([
        {"tool": "Bash", "input": {"command": "tail -f /dev/null"}}, {"text": "x"}]))
    (root / "cases" / "001-shopping").rename(root / "cases" / "000-shopping")  # runs first
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    process = subprocess.Popen([sys.executable, "-m", "agent_eval_sandbox", "run", "--offline", "--run-id", "r1"],
                               cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = root / "eval" / "runs" / "starter" / "r1"
    try:
        deadline = time.monotonic() + 180
        while not (run_dir / "cases" / "003-slow" / "stdout.log").exists():
            assert time.monotonic() < deadline and process.poll() is None, "the slow case never started"
            time.sleep(0.2)
        time.sleep(3)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    first = json.loads((run_dir / "run_result.json").read_text())
    assert first["interrupted"] is True
    assert first["per_case"]["000-shopping"]["completed"] is True
    assert first["per_case"]["003-slow"]["end_reason"] == "interrupted"
    kept_started = first["per_case"]["000-shopping"]["started_at"]
    # The eval changed since: refused, in one line
    original = eval_yaml.read_text()
    eval_yaml.write_text(original + "# edited\n")
    refused = cli("run", "--resume", "latest", cwd=root)
    assert refused.returncode == 2 and "changed since it started" in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1
    eval_yaml.write_text(original)
    resumed = cli("run", "--resume", "latest", "--json", cwd=root)
    # The slow case writes no note this time either: the gate fails (exit 1).
    assert resumed.returncode == 1, resumed.stderr
    assert _run_dir(resumed, root).resolve() == run_dir.resolve()
    result = json.loads((run_dir / "run_result.json").read_text())
    assert result["interrupted"] is False and result["planned"] == 3 and result["finished"] == 3
    assert result["per_case"]["000-shopping"]["started_at"] == kept_started  # kept, not run again
    assert result["per_case"]["002-reading"]["completed"] is True
    # Run again in the resume (how the endless Bash call ends is the CLI's business: its deadline or the tool's).
    slow_again = result["per_case"]["003-slow"]
    assert slow_again["ran"] is True and slow_again["end_reason"] != "interrupted"
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    assert sorted(summary["per_case"]) == ["000-shopping", "002-reading", "003-slow"]
    assert json.loads((run_dir / "run.json").read_text())["resumed_at"]
    done = cli("run", "--resume", str(run_dir), cwd=root)
    assert done.returncode == 2 and "every case of it finished" in done.stderr


def test_epochs_run_each_case_in_its_own_sandbox_and_aggregate(tmp_path: Path) -> None:
    root = _starter(tmp_path)
    ran = cli("run", "--offline", "--json", "--epochs", "3", "--case", "002-reading", cwd=root)
    assert ran.returncode == 0, ran.stderr
    run_dir = _run_dir(ran, root)
    per_case = json.loads(ran.stdout)["run_result"]["per_case"]
    assert sorted(per_case) == ["002-reading#1", "002-reading#2", "002-reading#3"]
    assert len({o["session_id"] for o in per_case.values()}) == 3  # three separate agent sessions
    epochs = yaml.safe_load((run_dir / "epochs.yaml").read_text())
    entry = epochs["per_case"]["002-reading"]["note_written"]
    assert entry["passed"] == 3 and entry["pass@3"] == 1.0 and entry["pass^3"] == 1.0 and entry["mean"] == 1.0
    assert "pass@3=1.000 pass^3=1.000" in ran.stderr


def test_quiet_prints_the_verdict_line_only_and_verbose_each_stage(tmp_path: Path) -> None:
    root = _starter(tmp_path)
    quiet = cli("run", "--offline", "-q", cwd=root)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    (line,) = quiet.stdout.splitlines()
    assert line.startswith("PASS: starter run ") and "2/2 cases completed, 0 regression(s) (exit 0)" in line
    loud = cli("run", "--offline", "-v", "--case", "001-*", cwd=root)
    assert loud.returncode == 0, loud.stderr
    # progress before the first case, in order, then each stage of the case
    said = loud.stderr
    steps = ["sandbox image: checking", "sandbox image: agent-eval-sandbox",
             "checking that the sandboxes can mount", "staging the project", "running 1 case(s)",
             "debug: case 001-shopping: starting", "debug: case 001-shopping: running",
             "debug: case 001-shopping: collecting"]
    positions = [said.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), said
    assert "debug: agent-eval-sandbox:" in said and "is present: no build" in said  # the image decision
    plain = cli("run", "--offline", "--case", "001-*", cwd=root)
    assert "sandbox image: checking" in plain.stderr and "debug:" not in plain.stderr


def test_mlflow_block_logs_the_judged_run_to_a_local_sqlite_store(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    root = _starter(tmp_path)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    eval_yaml = root / "eval.yaml"
    eval_yaml.write_text(eval_yaml.read_text() + f"\nmlflow:\n  experiment: starter-exp\n  tracking_uri: {store}\n"
                         "  tags: {suite: nightly}\n")
    ran = cli("run", "--offline", "--json", "--strict", "--run-id", "tracked", cwd=root)
    assert ran.returncode == 0, ran.stderr
    assert "warning: mlflow" not in ran.stderr, ran.stderr
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("starter-exp")
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.info.run_name == "tracked" and logged.info.status == "FINISHED"
    assert logged.data.params["run_id"] == "tracked" and logged.data.params["offline"] == "True"
    assert logged.data.tags["suite"] == "nightly" and logged.data.tags["regressions_detected"] == "no"
    metrics = logged.data.metrics
    assert metrics["note_written/pass_rate"] == 1.0 and metrics["num_cases"] == 2.0
    top = {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert {"summary.yaml", "report.html", "run_result.json", "cases"} <= top, top
    case_files = {a.path for a in client.list_artifacts(logged.info.run_id, "cases/001-shopping")}
    assert "cases/001-shopping/transcript.jsonl" in case_files, case_files
    traces = client.search_traces(locations=[experiment.experiment_id])
    by_case = {t.data.spans[0].name: t for t in traces}
    assert sorted(by_case) == ["001-shopping", "002-reading"]
    outputs = by_case["002-reading"].data.spans[0].outputs
    assert outputs["end_reason"] == "exited" and outputs["judges"]["note_written"]["value"] is True
