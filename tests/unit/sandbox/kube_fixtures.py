"""Shared bits of the Kubernetes unit tests: strict schema validation and a spec with mounts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import kubernetes_validate

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.sandbox.base import BindMount, Limits, SandboxSpec

# The newest Kubernetes version whose schemas the pinned kubernetes-validate ships.
KUBERNETES_VERSION = kubernetes_validate.latest_version()


def validate_strict(obj: dict[str, Any]) -> None:
    """Raise unless `obj` is valid for KUBERNETES_VERSION, unknown fields included (strict mode)."""
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def spec_with_mounts(tmp_path: Path, image: str = "registry.example/aes:1") -> SandboxSpec:
    channel = tmp_path / "channel"
    channel.mkdir()
    (channel / paths.PROMPT_FILE_NAME).write_text("prompt")
    managed = tmp_path / "managed.json"
    managed.write_text("{}")
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "s.md").write_text("skill")
    claude_md = tmp_path / "CLAUDE.md"
    claude_md.write_text("notes")
    return SandboxSpec(
        image=image, run_id="20250101-120000-ab12", case_id="case_1/odd name", deadline_epoch=time.time() + 4000,
        limits=Limits(cpus=1.5, memory_bytes=2 * 1024**3, workspace_bytes=1024**3, tmp_bytes=256 * 1024**2,
                      home_bytes=256 * 1024**2),
        mounts=(BindMount(channel, paths.RUN_DIR), BindMount(managed, paths.MANAGED_SETTINGS),
                BindMount(skills, f"{paths.WORKSPACE}/skills"), BindMount(claude_md, f"{paths.WORKSPACE}/CLAUDE.md")),
    )
