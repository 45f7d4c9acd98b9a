"""The quickstart, a deadline and leak-freedom on the cluster KUBECONFIG names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from agent_eval_sandbox.config.models import SandboxConfig
from agent_eval_sandbox.sandbox.base import EndReason, SandboxSpec
from agent_eval_sandbox.sandbox.kubernetes_backend import KubernetesBackend
from agent_eval_sandbox.sandbox.kubernetes_objects import run_selector

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "agent-eval-sandbox")


def _eval(tmp_path: Path, settings: dict[str, str], extra: dict | None = None) -> Path:
    project = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", project)
    config = yaml.safe_load((project / "eval.yaml").read_text())
    config["sandbox"] = {"backend": "kubernetes", "image": settings["image"], "namespace": settings["namespace"],
                         "controller": {"host": settings["controller_host"]}}
    config.update(extra or {})
    (project / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return project / "eval.yaml"


def _run(eval_yaml: Path, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    if os.environ.get("AGENT_EVAL_K8S_ALLOW_UNENFORCED"):
        flags = (*flags, "--allow-unenforced-network")
    return subprocess.run([CLI, "run", str(eval_yaml), "--offline",
                           "--runs-dir", str(tmp_path / "runs"), *flags], capture_output=True, text=True,
                          timeout=1800, check=False)


def _backend(settings: dict[str, str]) -> KubernetesBackend:
    config = SandboxConfig.model_validate({"backend": "kubernetes", "image": settings["image"],
                                           "namespace": settings["namespace"],
                                           "controller": {"host": settings["controller_host"]}})
    return KubernetesBackend(config, allow_unenforced_network=bool(os.environ.get("AGENT_EVAL_K8S_ALLOW_UNENFORCED")))


def test_the_quickstart_passes_and_leaves_nothing(cluster_settings, tmp_path):
    run = _run(_eval(tmp_path, cluster_settings), tmp_path, "--run-id", "cluster-quickstart")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "REGRESSIONS: 0" in run.stdout
    assert _backend(cluster_settings).api.list_managed(run_selector("cluster-quickstart")) == []


def test_a_case_past_its_deadline_is_stopped_collected_and_deleted(cluster_settings, tmp_path):
    backend = _backend(cluster_settings)
    try:
        backend.prepare_run("cluster-deadline")
        box = backend.create(SandboxSpec(image=cluster_settings["image"], run_id="cluster-deadline", case_id="c1",
                                         deadline_epoch=time.time() + 600))
        started = time.monotonic()
        result = box.exec(["sh", "-c", "echo before > /workspace/f; sleep 600"], timeout=5)
        assert result.end_reason is EndReason.TIMED_OUT and time.monotonic() - started < 60
        out = box.copy_out("/workspace", tmp_path / "out", max_bytes=1 << 20, max_files=10)
        assert out.found and (tmp_path / "out" / "f").read_text() == "before\n"
        box.destroy()
        assert backend.api.pod_state(box.name) is None or backend.api.pod_state(box.name).phase != "Running"
    finally:
        backend.destroy_run("cluster-deadline")
        backend.close()
    assert backend.api.list_managed(run_selector("cluster-deadline")) == []


def test_an_interrupted_run_leaves_nothing(cluster_settings, tmp_path):
    eval_yaml = _eval(tmp_path, cluster_settings)
    proc = subprocess.Popen([CLI, "run", str(eval_yaml), "--offline",
                             "--runs-dir", str(tmp_path / "runs"), "--run-id", "cluster-interrupted",
                             *(["--allow-unenforced-network"] if os.environ.get("AGENT_EVAL_K8S_ALLOW_UNENFORCED")
                               else [])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    backend = _backend(cluster_settings)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not any(
            o.kind == "pod" for o in backend.api.list_managed(run_selector("cluster-interrupted"))):
        time.sleep(1)
    proc.terminate()
    assert proc.wait(timeout=120) == 143
    assert backend.api.list_managed(run_selector("cluster-interrupted")) == []
