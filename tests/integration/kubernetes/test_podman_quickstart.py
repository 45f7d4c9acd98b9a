"""The quickstart, every case in a Pod the Kubernetes backend generated, run for real by podman.

The real CLI in each Pod reaches the offline scripted model over TCP through
the controller's relay with its case's token, as a Pod reaches the
controller's Service; everything else is the ordinary run (the case
pipeline, the gateway, copy-out, the judges).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from agent_eval_sandbox.app.run import RunRequest, execute_run
from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.read import open_finished_run
from agent_eval_sandbox.runner.plan import plan_invocations
from agent_eval_sandbox.sandbox.image import SandboxImage
from agent_eval_sandbox.sandbox.kubernetes_backend import KubernetesBackend
from agent_eval_sandbox.sandbox.labels import MANAGED
from agent_eval_sandbox.sandbox.relay import Relay
from tests.integration.kubernetes.podman_api import PodmanPodApi

pytestmark = pytest.mark.docker

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart"


def test_the_quickstart_runs_in_podman_pods_through_the_relay(podman_api: PodmanPodApi, podman_image: str,
                                                              tmp_path: Path):
    project = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, project)
    config = yaml.safe_load((project / "eval.yaml").read_text())
    config["sandbox"] = {"backend": "kubernetes", "image": podman_image, "namespace": "evals",
                         "controller": {"host": "127.0.0.1", "listen": "127.0.0.1"}}
    (project / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    loaded = load_eval_config(project / "eval.yaml")
    dataset = load_dataset(loaded)
    settings = resolve_run_settings(loaded.config, CliOverrides(), num_cases=len(dataset.cases))
    request = RunRequest(loaded=loaded, dataset=dataset, settings=settings,
                         invocations=plan_invocations(loaded.config, dataset.cases, settings),
                         runs_base=tmp_path / "runs", run_id="podman-quickstart", offline=True)
    relay = Relay("127.0.0.1", 0)
    # podman enforces no NetworkPolicy: the enforcement probe is the unit tests' (on a faked API).
    warnings: list[str] = []
    backend = KubernetesBackend(loaded.config.sandbox, api=podman_api, relay=relay, allow_unenforced_network=True,
                                start_timeout_s=120, warn=warnings.append)
    console = Console(file=io.StringIO(), width=200)
    try:
        outcome = execute_run(request, err_console=console, show_progress=False, backend=backend,
                              image_step=lambda s, r, c: SandboxImage(ref=podman_image, built=False))
    finally:
        backend.close()
    log = console.file.getvalue()  # type: ignore[attr-defined]
    assert any("--allow-unenforced-network" in w for w in warnings)
    # On failure: which case, how it ended and why, and what the relay refused.
    assert outcome.score is not None and outcome.score.exit_code == 0, (log, _case_endings(outcome.run_dir),
                                                                        relay.refusal_log)
    result = outcome.result
    assert result.num_cases == 3
    for case in ("001-greet-ada", "002-greet-grace", "003-fix-typo"):
        case_dir = outcome.run_dir.case(case)
        data = json.loads(case_dir.result.read_text())
        assert data["end_reason"] == "exited" and data["exit_code"] == 0, data
        # Every model request went through the case's own channel (its request log), via the relay.
        records = [json.loads(line) for line in case_dir.gateway_log.read_text().splitlines()]
        assert records and all(r["outcome"] == "forwarded" and r["case_id"] == case for r in records)
    greeting = outcome.run_dir.case("001-greet-ada").output("artifacts/greeting.md")
    assert "Ada" in greeting.read_text()
    # Leak-free: every Pod and the policy of the run are gone, and so are the tokens.
    assert podman_api.manifests == {}
    assert podman_api.running_pods(f"{MANAGED}=1") == []
    assert podman_api.policies == {}
    assert relay.registered == 0 and relay.refusals == 0


def _case_endings(run_dir: RunDir) -> dict[str, object]:
    """How each case ended, as the judges read it (a case with no directory too), and its stderr's tail."""
    run = open_finished_run(run_dir.root)
    endings: dict[str, object] = {}
    for case in run.case_ids:
        outcome = run.outcome(case)
        stderr = run.case(case).stderr_log
        ending = {"end_reason", "exit_code", "error", "limits_hit"}
        endings[case] = {
            "outcome": outcome.model_dump(include=ending) if outcome is not None else None,
            "stderr": stderr.read_text(errors="replace")[-600:] if stderr.is_file() else None,
        }
    return endings
