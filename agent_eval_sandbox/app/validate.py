"""Loading an eval for use: the config's own checks (config/loader.py), then the judges' (judges/validate.py).

The config layer knows the eval.yaml format; whether a builtin judge exists
or a check snippet compiles is the judges' business. Everything that loads an
eval to run, score or validate it goes through `load_checked`; `validate` and
`run` then plan every invocation (`plan_checked`: every case's template
renders) and run the preflight (app/preflight.py). With `--strict`, any
warning of those steps refuses the eval (`refuse_warnings`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_eval_sandbox.app.preflight import Preflight, preflight
from agent_eval_sandbox.config.dataset import Case, Dataset, load_dataset
from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config
from agent_eval_sandbox.config.settings import CliOverrides, RunSettings, resolve_run_settings
from agent_eval_sandbox.errors import StrictModeError, UserError
from agent_eval_sandbox.judges.validate import validate_judges
from agent_eval_sandbox.rundir.layout import epoch_case_id
from agent_eval_sandbox.runner.plan import Invocation, plan_invocations


def load_checked(path: Path | str) -> LoadedConfig:
    """eval.yaml, validated by the config models and by the judges; raises ConfigError."""
    loaded = load_eval_config(path)
    warnings = validate_judges(loaded.config, paths=loaded.paths, source=loaded.path)
    if not loaded.config.judges:
        # A misspelt `judges:` key leaves none: the run would check nothing and pass.
        warnings.append("no judges: a run would check nothing and pass; add `judges:`")
    loaded.warnings.extend(f"{loaded.path}: {warning}" for warning in warnings)
    return loaded


def plan_checked(loaded: LoadedConfig, cases: list[Case], settings: RunSettings) -> list[Invocation]:
    """Every invocation, its template rendered for its case; an error names the case's input file,
    the template's field and eval.yaml (runner/plan.py)."""
    return plan_invocations(loaded.config, cases, settings, eval_file=loaded.path)


def refuse_warnings(warnings: Sequence[str]) -> None:
    """`--strict`: a warning is an error. The warnings are printed already; this is the one error line."""
    if warnings:
        count = f"{len(warnings)} warning{'s' if len(warnings) > 1 else ''}"
        raise StrictModeError(f"--strict: {count}, the first: {warnings[0]}",
                              fix="fix what each `warning:` line says, or run without --strict")


@dataclass
class CheckedEval:
    """An eval loaded, planned and preflighted, with every warning on the way."""

    loaded: LoadedConfig
    dataset: Dataset
    settings: RunSettings
    invocations: list[Invocation]
    preflight: Preflight
    warnings: list[str]


def checked_eval(eval_yaml: Path, overrides: CliOverrides, *, offline: bool, claude_version: str | None,
                 warn: Callable[[str], None],
                 select: Callable[[list[str]], list[str]] | None = None, epochs: int = 1) -> CheckedEval:
    """What `validate` and `run` check before anything starts; raises UserError on the first error.

    `warn` gets each warning as soon as it is known, so the ones before an error are shown too.
    `select` narrows the dataset's case ids (`run --case/--limit`, reruns) before planning; with
    `epochs` > 1 each case becomes `<id>#1` … `<id>#N` (`run --epochs`)."""
    loaded = load_checked(eval_yaml)
    for warning in loaded.warnings:
        warn(warning)
    dataset = load_dataset(loaded)
    for warning in dataset.warnings:
        warn(warning)
    if select is not None:
        chosen = set(select(dataset.ids))
        dataset = dataclasses.replace(dataset, cases=[c for c in dataset.cases if c.id in chosen])
    if epochs > 1:
        if loaded.config.is_batch:
            raise UserError("--epochs runs each case in its own sandbox: batch mode runs all cases in one",
                            fix="use execution.mode: case, or drop --epochs")
        dataset = dataclasses.replace(dataset, cases=[dataclasses.replace(c, id=epoch_case_id(c.id, n))
                                                      for c in dataset.cases for n in range(1, epochs + 1)])
    settings = resolve_run_settings(loaded.config, overrides, num_cases=len(dataset.cases))
    invocations = plan_checked(loaded, dataset.cases, settings)
    checks = preflight(loaded, dataset, invocations, offline=offline, claude_version=claude_version)
    for warning in checks.warnings:
        warn(warning)
    return CheckedEval(loaded, dataset, settings, invocations, checks,
                       [*loaded.warnings, *dataset.warnings, *checks.warnings])
