"""What a hook is told about the run and its case: contexts and environments (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RUN_VARS = (
    "AGENT_EVAL_WORKSPACE",
    "AGENT_EVAL_RUN_ID",
    "AGENT_EVAL_CONFIG",
    "AGENT_EVAL_PROJECT_ROOT",
    "AGENT_EVAL_MODEL",
)
CASE_VARS = ("CASE_ID", "CASE_WORKSPACE", "CASE_SOURCE_DIR", "CASE_INPUT")


@dataclass(frozen=True)
class RunInfo:
    """The run, as every hook of it sees it."""

    run_id: str
    run_dir: Path  # logs go to <run_dir>/hooks/
    project_root: Path  # cwd of the run-wide phases
    config_path: Path  # absolute path of eval.yaml
    workspace_root: Path  # AGENT_EVAL_WORKSPACE on the host
    model: str
    # Host hooks inherit it, as in the reference. It never reaches a sandbox:
    # it holds the caller's credentials.
    caller_env: Mapping[str, str]

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "hooks"


@dataclass(frozen=True)
class CaseInfo:
    """One case, with its host-side paths."""

    id: str
    workspace: Path  # the case workspace on the host: cwd of host-scope per-case hooks
    source_dir: Path  # the case directory under dataset.path
    input_path: Path  # the case's input.yaml


def host_env(run: RunInfo, case: CaseInfo | None) -> dict[str, str]:
    """The caller's environment plus the harness variables, host paths."""
    env = dict(run.caller_env)
    # A CASE_* inherited from whoever started us must not pass for this run's case.
    for name in CASE_VARS:
        env.pop(name, None)
    env.update(
        AGENT_EVAL_WORKSPACE=str(run.workspace_root),
        AGENT_EVAL_RUN_ID=run.run_id,
        AGENT_EVAL_CONFIG=str(run.config_path),
        AGENT_EVAL_PROJECT_ROOT=str(run.project_root),
        AGENT_EVAL_MODEL=run.model,
    )
    if case is not None:
        env.update(
            CASE_ID=case.id,
            CASE_WORKSPACE=str(case.workspace),
            CASE_SOURCE_DIR=str(case.source_dir),
            CASE_INPUT=str(case.input_path),
        )
    return env


def container_env(run: RunInfo, case: CaseInfo, workspace: str) -> dict[str, str]:
    """The harness variables with the paths as seen inside the sandbox, and nothing else.

    eval.yaml, the project and the case's source directory hold the answer
    key and are never in the sandbox, so their variables are set but empty
    (a script that tests them with `-n` sees "not available"). The caller's
    environment is left out: it holds the credentials.
    """
    return {
        "AGENT_EVAL_WORKSPACE": workspace,
        "AGENT_EVAL_RUN_ID": run.run_id,
        "AGENT_EVAL_CONFIG": "",
        "AGENT_EVAL_PROJECT_ROOT": "",
        "AGENT_EVAL_MODEL": run.model,
        "CASE_ID": case.id,
        "CASE_WORKSPACE": workspace,
        "CASE_SOURCE_DIR": "",
        "CASE_INPUT": f"{workspace.rstrip('/')}/input.yaml",
    }
