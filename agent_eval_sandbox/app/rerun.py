"""Runs made from earlier runs: `run --rerun-failed RUN_DIR` and `run --resume RUN_DIR`.

A rerun is a new run of the cases that failed a judge or did not complete, linked to its source in
run.json (`rerun_of`). A resume finishes an interrupted run in its own directory: the cases that
ended for good are kept, the others (interrupted, never started, or lost to an infrastructure error)
run again. A resume must judge the same eval on the same inputs as the cases it keeps, so run.json
keeps a fingerprint of both (`fingerprint`) and a resume refuses when it differs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.models import CaseOutcome, parse_outcome
from agent_eval_sandbox.rundir.read import read_mapping

# Outcomes a resume runs again: the run's stop cut them short, or our plumbing failed them.
RERUN_ON_RESUME = frozenset({"interrupted", "infra_error"})


def _tree_digest(root: Path) -> str:
    """Every file under root, by relative path and content (symlinks by their target)."""
    digest = hashlib.sha256()
    if root.is_dir():
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                digest.update(f"L {path.relative_to(root)} {path.readlink()}\n".encode())
            elif path.is_file():
                digest.update(f"F {path.relative_to(root)}\n".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def fingerprint(loaded: LoadedConfig) -> dict[str, str]:
    """What a resumed run must still be judged on: eval.yaml, the dataset, the project's skills."""
    return {
        "eval": hashlib.sha256(loaded.path.read_bytes()).hexdigest(),
        "dataset": _tree_digest(loaded.dataset_dir),
        "skills": _tree_digest(loaded.root / ".claude"),
    }


def changed_parts(recorded: Mapping[str, Any], now: Mapping[str, str]) -> list[str]:
    return [part for part, digest in now.items() if recorded.get(part) != digest]


def _run_files(run_dir: Path, flag: str) -> tuple[RunDir, dict[str, Any], dict[str, Any]]:
    run = RunDir(run_dir)
    meta, problem = read_mapping(run.run_json)
    if problem or not meta:
        raise UserError(f"{run_dir} is no run directory (no readable run.json)",
                        fix=f"give {flag} a directory `run` made, or `latest`")
    result, _ = read_mapping(run.run_result)
    return run, meta, result


def _outcomes(result: Mapping[str, Any]) -> dict[str, CaseOutcome | None]:
    per_case = result.get("per_case")
    return {str(k): parse_outcome(v) for k, v in per_case.items()} if isinstance(per_case, dict) else {}


def failed_case_ids(run_dir: Path) -> tuple[list[str], dict[str, Any]]:
    """The cases of a run that did not complete or that some judge failed (value false, an error,
    not run); with the run's run.json."""
    run, meta, result = _run_files(run_dir, "--rerun-failed")
    outcomes = _outcomes(result)
    if not outcomes:
        raise UserError(f"{run_dir}: run_result.json holds no cases", fix="rerun the whole eval")
    summary, _ = read_mapping(run.summary_yaml)
    judged = summary.get("per_case") if isinstance(summary.get("per_case"), dict) else {}
    failed = []
    for case_id, outcome in outcomes.items():
        verdicts = judged.get(case_id) if isinstance(judged, dict) else None
        if outcome is None or not outcome.completed or not isinstance(verdicts, dict) or any(
                _failed(v) for v in verdicts.values()):
            failed.append(case_id)
    return failed, meta


def _failed(verdict: Any) -> bool:
    if not isinstance(verdict, dict):
        return True
    return verdict.get("value") is False or verdict.get("status") in ("error", "not_run")


@dataclass(frozen=True)
class ResumePlan:
    run: RunDir
    meta: dict[str, Any]
    kept: list[CaseOutcome]  # in the run's order
    to_run: list[str]


def plan_resume(run_dir: Path) -> ResumePlan:
    """What a resume keeps and runs; refuses a run that is not resumable."""
    run, meta, result = _run_files(run_dir, "--resume")
    outcomes = _outcomes(result)
    if not outcomes:
        raise UserError(f"{run_dir} cannot be resumed: it recorded no cases (run_result.json is missing: the run "
                        "was killed before it could record itself, or is still running)",
                        fix="run the eval again")
    to_run = [c for c, o in outcomes.items() if o is None or o.end_reason in RERUN_ON_RESUME]
    if not to_run:
        raise UserError(f"{run_dir} cannot be resumed: every case of it finished",
                        fix="to run failures again use --rerun-failed; to judge again, `score`")
    kept, seen = [], set()
    for case_id, outcome in outcomes.items():
        if case_id not in to_run and outcome is not None and outcome.case_id not in seen:
            seen.add(outcome.case_id)
            kept.append(outcome)
    return ResumePlan(run=run, meta=meta, kept=kept, to_run=to_run)


def check_unchanged(plan: ResumePlan, loaded: LoadedConfig) -> None:
    recorded = plan.meta.get("fingerprint")
    if not isinstance(recorded, dict):
        raise UserError(f"{plan.run.root} cannot be resumed: its run.json has no fingerprint of the eval "
                        "(made by an older version)", fix="run the eval again")
    changed = changed_parts(recorded, fingerprint(loaded))
    if changed:
        raise UserError(f"{plan.run.root} cannot be resumed: {' and '.join(changed)} changed since it started "
                        f"({loaded.path}); its kept cases would be judged against another eval",
                        fix="restore them, or start a new run (--rerun-failed RUN_DIR runs only what failed)")
