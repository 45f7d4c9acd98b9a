"""What a hook is told about the run and its case: contexts, environments, working directories (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_eval_sandbox.host_env import untrusted_free_env
from agent_eval_sandbox.lifecycle.model import Phase

RUN_VARS = (
    "AGENT_EVAL_WORKSPACE",
    "AGENT_EVAL_RUN_ID",
    "AGENT_EVAL_CONFIG",
    "AGENT_EVAL_PROJECT_ROOT",
    "AGENT_EVAL_MODEL",
)
CASE_VARS = ("CASE_ID", "CASE_WORKSPACE", "CASE_SOURCE_DIR", "CASE_INPUT", "CASE_RUN_DIR", "STEP_ID", "STEP_INDEX")


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

    @property
    def agent_output_dirs(self) -> tuple[Path, ...]:
        """Where this run keeps what agents wrote: collected workspaces (under the
        staging root) and the run directory. Host hooks never search them for code."""
        return (self.workspace_root, self.run_dir)


@dataclass(frozen=True)
class CaseInfo:
    """One case, with its host-side paths."""

    id: str
    workspace: Path  # the case workspace on the host (CASE_WORKSPACE); after the agent, its output
    source_dir: Path  # the case directory under dataset.path
    input_path: Path  # the case's input.yaml
    run_dir: Path | None = None  # the case's folder of the run directory (CASE_RUN_DIR)
    # In before_step/after_step: the step (STEP_ID, STEP_INDEX, 0-based).
    step_id: str | None = None
    step_index: int | None = None

    def step_env(self) -> dict[str, str]:
        if self.step_id is None:
            return {}
        return {"STEP_ID": self.step_id, "STEP_INDEX": str(self.step_index if self.step_index is not None else "")}


def host_cwd(phase: Phase, run: RunInfo, case: CaseInfo | None) -> Path:
    """Where a host-scope hook runs.

    before_each runs in the case workspace, as in the reference: the host built
    it from the dataset and the agent has not run yet, and `.hook-outputs.yaml`
    is read there. after_each runs in the project root: the workspace is now
    what the agent left, and a command run in it would find the agent's files
    first (a `json/` package for `python3 -m json.tool`, a `.git` for `git
    status`, `./scripts/x.sh`). The hook still gets the workspace as
    CASE_WORKSPACE, to read as data. The run-wide phases run in the project root.
    """
    if case is not None and phase is Phase.BEFORE_EACH:
        return case.workspace
    return run.project_root


def host_env(run: RunInfo, case: CaseInfo | None) -> dict[str, str]:
    """The caller's environment, rid of agent paths (`agent_eval_sandbox.host_env`), plus the harness variables."""
    env = untrusted_free_env(run.caller_env, run.agent_output_dirs)
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
            CASE_RUN_DIR=str(case.run_dir) if case.run_dir is not None else "",
        )
        env.update(case.step_env())
    return env


def container_env(run: RunInfo, case: CaseInfo, workspace: str) -> dict[str, str]:
    """The harness variables with the paths as seen inside the sandbox, and nothing else.

    eval.yaml, the project, the case's source directory and the run directory
    are never in the sandbox, so their variables are set but empty
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
        "CASE_RUN_DIR": "",
        **case.step_env(),
    }
