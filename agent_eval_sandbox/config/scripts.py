"""The offline scripts: files that play the models in an offline run, and where each is looked for.

None of them ever enters a sandbox (they are answer key: they say what the
"model" answers, how questions are answered and what the judges decide).
"""

from __future__ import annotations

from pathlib import Path

from agent_eval_sandbox.rundir.layout import judge_file_name

# What the model answers: in a case's directory; in batch mode, the dataset directory's.
MODEL_SCRIPT = "model_script.yaml"
# The AskUserQuestion model tier: the case's, else the one beside eval.yaml.
HOOK_SCRIPT = "hook_script.yaml"
# The LLM judges: beside eval.yaml, consumed one request at a time in case order.
JUDGE_SCRIPT = "judge_script.yaml"
# The pairwise judge of a baseline comparison: beside eval.yaml, consumed one request at a time,
# two per case (the run shown first, then the baseline), in case order.
PAIRWISE_SCRIPT = "pairwise_script.yaml"
# An agent judge's own agent, one conversation per sample: judge_scripts/<judge>.yaml (every
# sample) or judge_scripts/<judge>.<n>.yaml (sample n), in the case's directory, else beside eval.yaml.
JUDGE_AGENT_SCRIPTS = "judge_scripts"
ALL = frozenset({MODEL_SCRIPT, HOOK_SCRIPT, JUDGE_SCRIPT, PAIRWISE_SCRIPT, JUDGE_AGENT_SCRIPTS})
# A pipeline's step may have a script of its own in the case's directory: model_script.<step-id>.yaml.
STEP_SCRIPT_PREFIX, STEP_SCRIPT_SUFFIX = "model_script.", ".yaml"


def is_script_name(name: str) -> bool:
    """A file name the offline scripts use (never staged anywhere an agent could read it)."""
    return name in ALL or (name.startswith(STEP_SCRIPT_PREFIX) and name.endswith(STEP_SCRIPT_SUFFIX))


def step_script_path(case_dir: Path, step_id: str) -> Path:
    return case_dir / f"{STEP_SCRIPT_PREFIX}{step_id}{STEP_SCRIPT_SUFFIX}"


def model_script_path(case_dirs: list[Path], dataset_dir: Path, *, batch: bool) -> Path:
    return dataset_dir / MODEL_SCRIPT if batch or len(case_dirs) != 1 else case_dirs[0] / MODEL_SCRIPT


def hook_script_path(case_dir: Path | None, eval_dir: Path) -> Path | None:
    candidates = ([case_dir / HOOK_SCRIPT] if case_dir is not None else []) + [eval_dir / HOOK_SCRIPT]
    return next((path for path in candidates if path.is_file()), None)


def judge_script_path(eval_dir: Path) -> Path:
    return eval_dir / JUDGE_SCRIPT


def pairwise_script_path(eval_dir: Path) -> Path:
    return eval_dir / PAIRWISE_SCRIPT


def judge_agent_script_candidates(case_dir: Path | None, eval_dir: Path, judge: str, sample: int) -> list[Path]:
    """Where the script of an agent judge's sample is looked for, in order: the sample's own, then the
    judge's, in the case's directory, then beside eval.yaml."""
    name = judge_file_name(judge)
    dirs = ([case_dir] if case_dir is not None else []) + [eval_dir]
    return [d / JUDGE_AGENT_SCRIPTS / f"{name}{suffix}.yaml" for d in dirs for suffix in (f".{sample}", "")]


def judge_agent_script_path(case_dir: Path | None, eval_dir: Path, judge: str, sample: int) -> Path | None:
    return next((p for p in judge_agent_script_candidates(case_dir, eval_dir, judge, sample) if p.is_file()), None)
