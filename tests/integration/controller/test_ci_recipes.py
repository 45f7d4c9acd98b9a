"""The CI recipes of examples/ci/, run here: every command they give, as they give it.

What a CI service itself does — checking out, setting up Python, restoring a
cache, collecting artifacts — is emulated; each `run:`/`script:` line is executed
as written, and the paths the artifact steps collect must exist afterwards.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION, cache_root
from tests.integration.controller.conftest import REPO, SOCKET, docker

pytestmark = pytest.mark.docker

CI = REPO / "examples" / "ci"


def checkout(dest: Path) -> Path:
    """What actions/checkout leaves: the tracked files (and the recipes' own working copy of them)."""
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.splitlines()
    for name in tracked:
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def github_expr(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        assert key in values, f"the test does not know ${{{{ {key} }}}}"
        return values[key]

    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def restore_tool_cache(cache_dir: Path) -> None:
    """What actions/cache restores from an earlier run: Claude Code's release record. (This machine's
    containers reach no npm registry; a first run on GitHub looks it up itself.)"""
    record = cache_root() / "claude" / DEFAULT_CLAUDE_VERSION / "x86_64" / "integrity"
    target = cache_dir / "agent-eval-sandbox" / "claude" / DEFAULT_CLAUDE_VERSION / "x86_64" / "integrity"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(record, target)


def run_job(job: dict, workflow_env: dict[str, str], workspace: Path, values: dict[str, str],
            path_dirs: list[Path]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENT_EVAL_", "AES_"))}
    env["PATH"] = os.pathsep.join([*map(str, path_dirs), env["PATH"]])
    env.update({k: github_expr(str(v), values) for k, v in workflow_env.items()})
    for step in job["steps"]:
        if "run" not in step:
            continue
        step_env = {**env, **{k: github_expr(str(v), values) for k, v in (step.get("env") or {}).items()}}
        proc = subprocess.run(["bash", "-e", "-c", github_expr(step["run"], values)], cwd=workspace, env=step_env,
                              capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, f"{step.get('name')}: {proc.stderr[-3000:]}"
    for step in job["steps"]:
        collected = (step.get("with") or {}).get("report_paths") or (step.get("with") or {}).get("path")
        if step.get("uses", "").startswith(("mikepenz/action-junit-report", "actions/upload-artifact")):
            found = glob.glob(github_expr(collected, values), root_dir=workspace)
            assert found, f"{step['uses']}: nothing at {collected}"


def manifest_tags(tarball: Path) -> set[str]:
    listing = subprocess.run(["tar", "-xOf", str(tarball), "manifest.json"], capture_output=True, text=True,
                             check=True).stdout
    return {tag for entry in yaml.safe_load(listing) for tag in entry.get("RepoTags") or []}


def test_github_actions_workflow(tmp_path, sandbox_image):
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    # actions/setup-python: a Python 3.11 of its own, first on PATH.
    python = tmp_path / "python"
    subprocess.run([sys.executable, "-m", "venv", str(python)], check=True)
    workspaces = []
    for number, name in enumerate(("eval", "eval-in-container"), 1):
        workspace = checkout(tmp_path / name)
        if workspaces:  # actions/cache: the second job restores what the first one saved
            shutil.copytree(workspaces[-1] / ".aes-cache", workspace / ".aes-cache")
        restore_tool_cache(workspace / ".aes-cache" / "tool")
        values = {"github.workspace": str(workspace), "github.run_id": "7", "github.run_attempt": str(number),
                  "env.AES_RUN_ID": f"gh-7-{number}"}
        images = workspace / ".aes-cache" / "images.tar"
        saved = images.stat().st_mtime_ns if images.exists() else None
        run_job(workflow["jobs"][name], workflow["env"], workspace, values, [python / "bin"])
        workspaces.append(workspace)
        run_dir = workspace / "eval" / "runs" / "quickstart" / f"gh-7-{number}"
        assert (run_dir / "junit.xml").is_file() and (run_dir / "report.html").is_file()
        # The image cache holds the sandbox image and its base; a restored, current one is not rewritten.
        base = docker("image", "inspect", "--format", '{{index .Config.Labels "agent-eval-sandbox.base"}}',
                      sandbox_image).stdout.strip()
        assert {sandbox_image, base} <= manifest_tags(images)
        if saved is not None:
            assert images.stat().st_mtime_ns == saved


def test_gitlab_ci_job_in_the_controller_image_with_the_build_dir_in_a_volume(controller_image, tmp_path):
    """GitLab's docker executor: the job container gets the socket and the socket's group (config.toml),
    the project lives in a volume of the host's daemon at $CI_PROJECT_DIR: no bind mount of it anywhere."""
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["agent-eval"]
    assert job["image"]["entrypoint"] == [""]
    project_dir, job_id = "/builds/group/project", "4242"
    volume, cache = f"aes-test-builds-{os.getpid()}", f"aes-test-cache-{os.getpid()}"
    source = checkout(tmp_path / "src")
    restore_tool_cache(tmp_path / "cache")
    docker("volume", "create", volume)
    docker("volume", "create", cache)
    try:
        # The runner's clone: files as GitLab leaves them (umask 0000), in the builds volume; its /cache
        # volume as an earlier job left it.
        docker("run", "--rm", "--user", "0:0", "--entrypoint", "sh", "-v", f"{volume}:/builds",
               "-v", f"{cache}:/cache", "-v", f"{source}:/src:ro", "-v", f"{tmp_path / 'cache'}:/seed:ro",
               controller_image, "-c",
               f"mkdir -p {project_dir} && cp -a /src/. {project_dir} && cp -a /seed/. /cache && "
               "chmod -R a+rwX /builds /cache")
        variables = {"CI_PROJECT_DIR": project_dir, "CI_JOB_ID": job_id}
        variables.update({k: re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], v)
                          for k, v in job["variables"].items()})
        env_args = [arg for k, v in variables.items() for arg in ("-e", f"{k}={v}")]
        for line in job["script"]:
            proc = subprocess.run(
                ["docker", "run", "--rm", "--entrypoint", "", "--group-add", str(os.stat(SOCKET).st_gid),
                 "-v", f"{SOCKET}:{SOCKET}", "-v", f"{volume}:/builds", "-v", f"{cache}:/cache", "-w", project_dir,
                 *env_args, controller_image, "sh", "-c", line],
                capture_output=True, text=True, timeout=900)
            assert proc.returncode == 0, proc.stderr[-3000:]
        artifacts = job["artifacts"]
        listing = docker("run", "--rm", "--entrypoint", "sh", "-v", f"{volume}:/builds", "-w", project_dir,
                         controller_image, "-c",
                         f"ls -d {' '.join(artifacts['paths'])} {artifacts['reports']['junit']} "
                         f"eval/runs/quickstart/gitlab-{job_id}/report.html").stdout.split()
        assert f"eval/runs/quickstart/gitlab-{job_id}/junit.xml" in listing
        assert f"eval/runs/quickstart/gitlab-{job_id}/report.html" in listing
    finally:
        docker("volume", "rm", "-f", volume, cache, check=False)
