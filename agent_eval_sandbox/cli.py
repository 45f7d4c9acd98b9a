"""Command-line interface: `agent-eval-sandbox <command>`.

Every command maps user-caused errors (`UserError`) to one line on stderr and
exit code 2; exit 1 is reserved for "the eval ran and a threshold regressed (or
no case completed)", 3 for a bug of ours, 4 for an infrastructure error of a
case, 130/143 for an interrupted run (`exit_codes.py`); with --fail-on-regression, 1 also
when a judge regressed against the baseline (`compare`, `run --baseline`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import resource
import signal
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_eval_sandbox import __version__, exit_codes, verbosity
from agent_eval_sandbox.app.validate import CheckedEval, checked_eval, load_checked, refuse_warnings
from agent_eval_sandbox.config.dataset import Dataset
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.settings import (
    CliOverrides,
    RunSettings,
    require_runnable,
)
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.interception import compile_handlers
from agent_eval_sandbox.runner.plan import Invocation

if TYPE_CHECKING:
    from agent_eval_sandbox.sandbox.base import RemovedObject
    from agent_eval_sandbox.sandbox.image_gc import ImageGcResult

EXIT_USAGE = exit_codes.USAGE
EXIT_INTERNAL = exit_codes.INTERNAL
JUNIT_FAIL_ON_JUDGE_HELP = ("In junit.xml, a failing verdict of a judge without a threshold fails the suite "
                            "(by default it is reported, not failed).")


def _warn(message: str) -> None:
    if not verbosity.quiet():
        click.echo(f"warning: {message}", err=True)


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """One line and exit 2 for user errors; never a traceback for bad input."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            click.echo(f"error: {exc.render()}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(exit_codes.SIGINT)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as exc:  # a bug of ours, not the user's input
            if os.environ.get("AGENT_EVAL_DEBUG"):
                raise
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (set AGENT_EVAL_DEBUG=1 for the traceback)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)

    return wrapper


def load_with_warnings(eval_yaml: Path) -> LoadedConfig:
    loaded = load_checked(eval_yaml)
    for warning in loaded.warnings:
        _warn(warning)
    return loaded


def check_eval(eval_yaml: Path, overrides: CliOverrides, *, offline: bool,
               claude_version: str | None = None) -> CheckedEval:
    return checked_eval(eval_yaml, overrides, offline=offline, claude_version=claude_version, warn=_warn)


STRICT_HELP = "Refuse the eval (exit 2) if it has any warning: what CI should use."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-eval-sandbox")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run agent-eval-harness evals of Claude Code skills, one hardened container per case."""
    verbosity.begin(ctx)


def _summary_lines(loaded: LoadedConfig, dataset: Dataset, invocations: list[Invocation]) -> list[str]:
    config = loaded.config
    execution = config.execution
    if execution.skill:
        target = f"skill /{execution.skill} (arguments: {execution.arguments!r})"
    elif execution.prompt:
        target = f"prompt {execution.prompt!r}"
    else:
        target = "nothing (set execution.skill or execution.prompt)"
    ids = dataset.ids
    shown = ", ".join(ids[:5]) + (f", … (+{len(ids) - 5})" if len(ids) > 5 else "")
    judges = ", ".join(f"{j.name} ({j.kind})" for j in config.judges) or "none"
    hooks = ", ".join(
        f"{phase} {len(config.hooks.phase(phase))}"
        for phase in ("before_all", "before_each", "after_each", "before_scoring", "after_all", "before_report")
        if config.hooks.phase(phase)
    ) or "none"
    return [
        f"{loaded.path}: OK",
        f"  name:       {config.name}",
        f"  cases:      {len(ids)} ({shown})",
        f"  mode:       {execution.mode}" + (" (workspace_mode: repo)" if config.is_repo_mode else ""),
        f"  runs:       {target}",
        f"  model:      {config.models.skill or '(unset: pass --model)'}",
        f"  judges:     {judges}",
        f"  hooks:      {hooks}",
        f"  thresholds: {', '.join(config.thresholds) or 'none'}",
        f"  invocations: {len(invocations)}",
    ]


@cli.command()
@click.argument("eval_yaml", default="eval.yaml", type=click.Path(path_type=Path))
@click.option("--offline", is_flag=True,
              help="Also parse every script an offline run uses (model, hook and judge scripts).")
@click.option("--strict", is_flag=True, help=STRICT_HELP)
@handle_errors
def validate(eval_yaml: Path, offline: bool, strict: bool) -> None:
    """Check EVAL_YAML (default ./eval.yaml) and its dataset without running anything."""
    checked = check_eval(eval_yaml, CliOverrides(), offline=offline)
    handlers = compile_handlers(checked.loaded)
    if strict:
        refuse_warnings(checked.warnings)
    for line in _summary_lines(checked.loaded, checked.dataset, checked.invocations):
        click.echo(line)
    for line in checked.preflight.checked:
        click.echo(f"  checked:    {line}")
    if handlers is not None:
        click.echo(f"  interception: {len(handlers.handlers)} handler(s), hook model {handlers.hook_model}")


def _dry_run_report(loaded: LoadedConfig, settings: RunSettings, invocations: list[Invocation]) -> dict[str, Any]:
    return {
        "eval": loaded.config.name,
        "config": str(loaded.path),
        "mode": loaded.config.execution.mode,
        "model": settings.model,
        "parallelism": settings.parallelism,
        "invocations": [
            {
                "id": inv.id,
                "cases": [case.id for case in inv.cases],
                "prompt": inv.prompt,
                "arguments": inv.arguments,
                "timeout_s": settings.timeout_s,
                "max_budget_usd": settings.max_budget_usd,
            }
            for inv in invocations
        ],
    }


@cli.command()
@click.argument("eval_yaml", default="eval.yaml", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print what each case would run, then stop.")
@click.option("--model", help="Model for the skill under test (overrides models.skill).")
@click.option("--subagent-model", help="Model for subagents (overrides models.subagent).")
@click.option("--timeout", type=click.IntRange(min=0),
              help="Per-invocation timeout in seconds (overrides execution.timeout).")
@click.option("--max-budget", type=click.FloatRange(min=0),
              help="Per-invocation budget in USD (overrides execution.max_budget_usd).")
@click.option("--parallelism", type=click.IntRange(min=0), help="Cases at once (overrides execution.parallelism).")
@click.option("--skill-args", help="Template replacing execution.arguments (skill mode) or execution.prompt.")
@click.option("--offline", is_flag=True,
              help="Use each case's model_script.yaml as the model (scripted server behind the gateway): "
              "no key, no network.")
@click.option("--record", is_flag=True,
              help="Keep each case's model exchanges as cases/<id>/cassette.jsonl, for --replay.")
@click.option("--replay", type=click.Path(path_type=Path),
              help="Play each case's model from the cassettes of this recorded run: no key, no network.")
@click.option("--baseline", type=click.Path(path_type=Path),
              help="A judged run to compare this one with once judged (per-judge deltas, the pairwise judge); "
              "writes comparison.json.")
@click.option("--fail-on-regression", is_flag=True,
              help="With --baseline: exit 1 when a judge regressed against the baseline.")
@click.option("--runs-dir", help="Base directory of runs (default $AGENT_EVAL_RUNS_DIR, else eval/runs).")
@click.option("--shared-dir", envvar="AGENT_EVAL_SHARED_DIR", type=click.Path(path_type=Path),
              help="Directory for the files sandboxes mount (sockets, staged project). In a container it must be "
              "mounted from the host; default: the temp dir, or in a container the runs dir [AGENT_EVAL_SHARED_DIR].")
@click.option("--run-id", help="Name of this run's directory (default: timestamp + random suffix).")
@click.option("--claude-version", help="Claude Code version baked into the sandbox image.")
@click.option("--rebuild-image", is_flag=True, help="Rebuild the sandbox image even if it exists.")
@click.option("--allow-unenforced-network", is_flag=True,
              help="Kubernetes: run even if the cluster does not enforce the run's NetworkPolicy (never for "
              "untrusted skills).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--strict", is_flag=True, help=STRICT_HELP)
@click.option("--junit-fail-on-judge", is_flag=True, help=JUNIT_FAIL_ON_JUDGE_HELP)
@click.option("--case", "case_patterns", multiple=True, metavar="ID_OR_GLOB",
              help="Run only the cases whose id is this or matches this glob (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="Run only the first N (selected) cases.")
@click.option("-x", "--exit-first", is_flag=True, help="Start no further case once one does not complete.")
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run each case N times (cases <id>#1 … <id>#N, each its own sandbox); the judges are "
              "aggregated across epochs in epochs.yaml (mean, pass@k, pass^k).")
@click.option("--rerun-failed", type=click.Path(path_type=Path), metavar="RUN_DIR",
              help="Run only the cases that failed a judge or did not complete in RUN_DIR (or `latest`), "
              "as a new run linked to it.")
@click.option("--resume", type=click.Path(path_type=Path), metavar="RUN_DIR",
              help="Finish the interrupted RUN_DIR (or `latest`) in place: its finished cases are kept.")
@handle_errors
def run(
    eval_yaml: Path,
    dry_run: bool,
    model: str | None,
    subagent_model: str | None,
    timeout: int | None,
    max_budget: float | None,
    parallelism: int | None,
    skill_args: str | None,
    offline: bool,
    record: bool,
    replay: Path | None,
    baseline: Path | None,
    fail_on_regression: bool,
    runs_dir: str | None,
    shared_dir: Path | None,
    run_id: str | None,
    claude_version: str | None,
    rebuild_image: bool,
    allow_unenforced_network: bool,
    as_json: bool,
    strict: bool,
    junit_fail_on_judge: bool,
    case_patterns: tuple[str, ...],
    limit: int | None,
    exit_first: bool,
    epochs: int,
    rerun_failed: Path | None,
    resume: Path | None,
) -> None:
    """Run the eval in EVAL_YAML (default ./eval.yaml), one sandbox per case."""
    from agent_eval_sandbox.app import rerun as reruns
    from agent_eval_sandbox.rundir.latest import resolve_run_arg
    from agent_eval_sandbox.runner.select import select_ids

    if offline and replay is not None:
        raise UserError("--offline and --replay are exclusive",
                        fix="--replay RUN_DIR plays the recorded run's models; drop --offline")
    base = _runs_base(runs_dir)
    replay = resolve_run_arg(replay, base) if replay is not None else None
    baseline = _baseline_arg(baseline, base, fail_on_regression=fail_on_regression, dry_run=dry_run)
    if resume is not None:
        # A resume runs the rest as the run was started (run.json); only what describes this machine
        # (--shared-dir, --allow-unenforced-network, --parallelism, --rebuild-image) is taken from here.
        _refuse_on_resume(rerun_failed=rerun_failed, case=case_patterns, limit=limit, run_id=run_id, replay=replay,
                          record=record, epochs=epochs > 1, model=model, subagent_model=subagent_model,
                          timeout=timeout, max_budget=max_budget, skill_args=skill_args)
        plan = reruns.plan_resume(resolve_run_arg(resume, base))
        eval_yaml, offline, run_id, record, replay, overrides, claude_version, epochs = _as_started(
            plan, offline=offline, claude_version=claude_version, parallelism=parallelism)
        runs_dir, rerun_of = str(plan.run.root.parent.parent), None
        to_run = set(plan.to_run)
        select: Callable[[list[str]], list[str]] | None = lambda ids: [i for i in ids if i in to_run]  # noqa: E731
    else:
        plan = None
        rerun_of = resolve_run_arg(rerun_failed, base) if rerun_failed is not None else None
        failed = _failed_ids(rerun_of) if rerun_of is not None else None
        select = None if not (case_patterns or limit or failed is not None) else (
            lambda ids: select_ids([i for i in ids if failed is None or i in failed], case_patterns, limit))
        overrides = CliOverrides(timeout=timeout, max_budget=max_budget, parallelism=parallelism,
                                 skill_args=skill_args, model=model, subagent_model=subagent_model)
    checked = checked_eval(eval_yaml, overrides, offline=offline, claude_version=claude_version, warn=_warn,
                           select=select, epochs=epochs)
    if plan is not None:
        reruns.check_unchanged(plan, checked.loaded)
    loaded, dataset, settings, invocations = checked.loaded, checked.dataset, checked.settings, checked.invocations
    if strict:
        refuse_warnings(checked.warnings)
    if not dry_run:
        require_runnable(loaded.config, settings, config_path=str(loaded.path))
        _execute(loaded, dataset, settings, invocations, offline=offline, runs_dir=runs_dir, run_id=run_id,
                 claude_version=claude_version, rebuild_image=rebuild_image, as_json=as_json, record=record,
                 replay=replay, junit_fail_on_judge=junit_fail_on_judge, shared_dir=shared_dir,
                 baseline=baseline, fail_on_regression=fail_on_regression,
                 allow_unenforced_network=allow_unenforced_network, exit_first=exit_first,
                 rerun_of=rerun_of, resume=plan, epochs=epochs)
        return
    report = _dry_run_report(loaded, settings, invocations)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(
        f"{report['eval']}: {len(invocations)} invocation(s), mode {report['mode']}, "
        f"model {settings.model or '(unset)'}, parallelism {settings.parallelism}"
    )
    for item in report["invocations"]:
        click.echo(f"{item['id']}:")
        click.echo(f"  prompt:  {item['prompt']}")
        click.echo(f"  timeout: {item['timeout_s']}s  budget: ${item['max_budget_usd']:.2f}")


def _runs_base(runs_dir: str | None) -> Path:
    from agent_eval_sandbox.rundir.layout import runs_base

    return runs_base(runs_dir, os.environ)


def _run_arg(value: Path, runs_dir: str | None = None) -> Path:
    """A RUN_DIR argument; `latest` is the newest run's (rundir/latest.py)."""
    from agent_eval_sandbox.rundir.latest import resolve_run_arg

    return resolve_run_arg(value, _runs_base(runs_dir))


def _failed_ids(run_dir: Path) -> set[str]:
    from agent_eval_sandbox.app.rerun import failed_case_ids

    failed, _ = failed_case_ids(run_dir)
    if not failed:
        click.echo(f"every case of {run_dir} completed and passed its judges: nothing to rerun", err=True)
        sys.exit(0)
    return set(failed)


def _refuse_on_resume(**options: Any) -> None:
    """Options that would change the run a resume finishes, named as the user spelt them."""
    given = [f"--{name.replace('_', '-')}" for name, value in options.items() if value]
    if given:
        raise UserError(f"--resume finishes a run as it was started: it takes no {', '.join(given)}",
                        fix="drop those options (to change them, start a new run)")


def _as_started(plan: Any, *, offline: bool, claude_version: str | None, parallelism: int | None,
                ) -> tuple[Path, bool, str, bool, Path | None, CliOverrides, str | None, int]:
    """How a run was started (its run.json), which a resume runs the rest with: eval.yaml, offline, run id,
    record, replay, the overrides (this machine's --parallelism first), Claude Code version, epochs."""
    meta = plan.meta
    recorded = meta.get("settings")
    settings: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    replay = meta.get("replay_of")
    was_offline = bool(meta.get("offline")) and not replay
    if offline and not was_offline:
        raise UserError(f"--resume {plan.run.root}: the run was not started --offline",
                        fix="drop --offline: a resume uses the model access the run started with")
    version = meta.get("claude_version")
    if claude_version and version and claude_version != version:
        raise UserError(f"--resume {plan.run.root}: the run was started with Claude Code {version}, "
                        f"not {claude_version}", fix="drop --claude-version")
    overrides = CliOverrides(timeout=settings.get("timeout_s"), max_budget=settings.get("max_budget_usd"),
                             parallelism=parallelism or settings.get("parallelism"), model=settings.get("model"),
                             subagent_model=settings.get("subagent_model"), skill_args=settings.get("skill_args"))
    return (Path(str(meta.get("config_path"))), was_offline, str(meta.get("run_id")), bool(meta.get("recorded")),
            Path(replay) if replay else None, overrides, str(version) if version else claude_version,
            int(meta.get("epochs") or 1))


def _baseline_arg(baseline: Path | None, base: Path, *, fail_on_regression: bool, dry_run: bool) -> Path | None:
    """--baseline RUN_DIR (or `latest`), refused before anything runs when it is not a judged run."""
    if fail_on_regression and baseline is None:
        raise UserError("--fail-on-regression needs --baseline", fix="name the run to compare with: --baseline RUN_DIR")
    if baseline is None:
        return None
    from agent_eval_sandbox.rundir.latest import resolve_run_arg

    baseline = resolve_run_arg(baseline, base)
    if not dry_run:
        from agent_eval_sandbox.app.compare import check_baseline

        check_baseline(baseline)
    return baseline


def _execute(
    loaded: LoadedConfig,
    dataset: Dataset,
    settings: RunSettings,
    invocations: list[Invocation],
    *,
    offline: bool,
    runs_dir: str | None,
    run_id: str | None,
    claude_version: str | None,
    rebuild_image: bool,
    as_json: bool,
    record: bool = False,
    replay: Path | None = None,
    junit_fail_on_judge: bool = False,
    shared_dir: Path | None = None,
    baseline: Path | None = None,
    fail_on_regression: bool = False,
    allow_unenforced_network: bool = False,
    exit_first: bool = False,
    rerun_of: Path | None = None,
    resume: Any = None,
    epochs: int = 1,
) -> None:
    from rich.console import Console

    from agent_eval_sandbox.app.run import RunRequest, execute_run
    from agent_eval_sandbox.rundir.layout import new_run_id, runs_base, validate_run_id
    from agent_eval_sandbox.runner.display import status_table

    request = RunRequest(
        loaded=loaded,
        dataset=dataset,
        settings=settings,
        invocations=invocations,
        runs_base=runs_base(runs_dir, os.environ),
        run_id=validate_run_id(run_id) if run_id else new_run_id(),
        offline=offline or replay is not None,
        claude_version=claude_version,
        rebuild_image=rebuild_image,
        record=record,
        replay=replay,
        junit_fail_on_judge=junit_fail_on_judge,
        shared_dir=shared_dir,
        baseline=baseline,
        allow_unenforced_network=allow_unenforced_network,
        exit_first=exit_first,
        rerun_of=rerun_of,
        resume=resume,
        epochs=epochs,
    )
    console = Console(quiet=verbosity.quiet())
    outcome = execute_run(request, err_console=verbosity.err_console(), show_progress=not as_json)
    result, score, run_dir = outcome.result, outcome.score, outcome.run_dir.root
    # A replay that strayed from its recording fails, whatever the thresholds say: that is what a replay checks.
    drifted = sorted(case for case, reason in result.end_reasons.items() if reason == "replay_mismatch")
    compared = outcome.comparison
    exit_code = ((score.exit_code if score is not None else exit_codes.INTERNAL) or (1 if drifted else 0)
                 or (compared.exit_code(fail_on_regression) if compared is not None else 0))
    if drifted:
        click.echo(f"REPLAY MISMATCH: {len(drifted)} case(s) asked for what their cassette does not hold: "
                   f"{', '.join(drifted[:10])} (see their replay_diff.txt)", err=True)
    if as_json:
        document: dict[str, Any] = {"run_dir": str(run_dir), "run_result": result.to_data(),
                                    "interrupted": result.interrupted}
        if score is not None:
            document["score"] = score.to_json()
        if compared is not None:
            document["comparison"] = compared.to_json(fail_on_regression)
        click.echo(json.dumps(document, indent=2, default=str))
        sys.exit(outcome.interrupted_exit or exit_code)
    console.print(status_table(outcome.statuses, title=f"{loaded.config.name} — run {request.run_id}"))
    cost = f"${result.cost_usd:.4f}" + (" (scripted: offline run, no model was billed)" if offline else "")
    console.print(f"{result.num_cases} case(s), {result.wall_clock_s:.1f}s wall clock, {cost}; results in {run_dir}",
                  highlight=False, markup=False)
    if outcome.interrupted_exit is not None or score is None:
        click.echo(f"INTERRUPTED: {result.finished} of {result.planned} cases finished; the run was not judged")
        if verbosity.quiet():
            sys.exit(outcome.interrupted_exit or exit_codes.SIGINT)
        click.echo(f"run directory: {run_dir}")
        click.echo(f"judge what finished with: agent-eval-sandbox score {run_dir}")
        sys.exit(outcome.interrupted_exit or exit_codes.SIGINT)
    _print_score(score)
    if compared is not None and not verbosity.quiet():
        for line in _comparison_lines(compared):
            click.echo(line)
    sys.exit(exit_code)


def _comparison_lines(result: Any) -> list[str]:
    from agent_eval_sandbox.compare.text import comparison_lines

    return [*comparison_lines(result.comparison), f"  comparison: {result.comparison_path}"]


def _print_score(score: Any) -> None:
    if verbosity.quiet():
        click.echo(score.verdict_line())
        return
    for warning in score.warnings:
        _warn(warning)
    for line in score.text_lines():
        click.echo(line)


def _finish_with_score(score: Any, as_json: bool) -> None:
    """Print a judged run's verdict (text or JSON) and exit with its code."""
    if as_json:
        click.echo(json.dumps(score.to_json(), indent=2, default=str))
    else:
        _print_score(score)
    sys.exit(score.exit_code)


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="eval.yaml to judge with (default: the one the run recorded).")
@click.option("--samples", type=click.IntRange(min=1),
              help="Samples per LLM and agent judge (overrides each judge's samples).")
@click.option("--judge-timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds one judge may take on one case.")
@click.option("--parallelism", type=click.IntRange(min=1), default=4, show_default=True,
              help="Cases judged at once (and agent judge sandboxes at once).")
@click.option("--offline", is_flag=True,
              help="Script the judges' models: judge_script.yaml (LLM judges), judge_scripts/ (agent judges).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--junit-fail-on-judge", is_flag=True, help=JUNIT_FAIL_ON_JUDGE_HELP)
@handle_errors
def score(run_dir: Path, config_path: Path | None, samples: int | None, judge_timeout: float, parallelism: int,
          offline: bool, as_json: bool, junit_fail_on_judge: bool) -> None:
    """Judge a finished run again (without re-running it); rewrite its reports. Exit 1 on a regression."""
    from agent_eval_sandbox.app.score import score_run

    result = score_run(_run_arg(run_dir), config_path, samples=samples, judge_timeout_s=judge_timeout,
                       parallelism=parallelism, offline=offline,
                       echo=None if as_json or verbosity.quiet() else (lambda line: click.echo(line, err=True)),
                       junit_fail_on_judge=junit_fail_on_judge)
    _finish_with_score(result, as_json)


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--junit-fail-on-judge", is_flag=True, help=JUNIT_FAIL_ON_JUDGE_HELP)
@handle_errors
def report(run_dir: Path, as_json: bool, junit_fail_on_judge: bool) -> None:
    """Rebuild summary, report.html and junit.xml of a judged run from its stored results."""
    from agent_eval_sandbox.report.build import build_reports

    _finish_with_score(build_reports(_run_arg(run_dir), junit_fail_on_judge=junit_fail_on_judge), as_json)


@cli.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="eval.yaml whose pairwise judge compares the outputs (default: the one RUN_A recorded).")
@click.option("--offline", is_flag=True,
              help="Play the pairwise judge's model from pairwise_script.yaml beside eval.yaml: no key, no network.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True,
              help="Significance level of the paired test.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when a judge regressed against the baseline.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def compare(run_a: Path, run_b: Path, config_path: Path | None, offline: bool, alpha: float,
            fail_on_regression: bool, as_json: bool) -> None:
    """Compare RUN_A (the run under test) with RUN_B (its baseline), judge by judge.

    Per-judge deltas (RUN_A - RUN_B) with a paired test over the cases both ran, and the
    `pairwise` judge when eval.yaml has one. Writes comparison.json into RUN_A and adds the
    comparison to its report.html. Exit 0; with --fail-on-regression, 1 when a judge regressed.
    """
    from agent_eval_sandbox.app.compare import compare_runs, online_endpoint
    from agent_eval_sandbox.runner.model_access import OfflineModels

    result = compare_runs(
        run_a, run_b, config_path=config_path, alpha=alpha,
        endpoint=(lambda loaded: OfflineModels(loaded).pairwise_endpoint()) if offline else online_endpoint,
        parallelism=1 if offline else 4, echo=None if as_json else (lambda line: click.echo(line, err=True)))
    if as_json:
        click.echo(json.dumps(result.to_json(fail_on_regression), indent=2, default=str))
    else:
        for line in _comparison_lines(result):
            click.echo(line)
    sys.exit(result.exit_code(fail_on_regression))


@cli.command("compile-handlers")
@click.argument("eval_yaml", default="eval.yaml", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Where to write (default: tool_handlers.yaml beside eval.yaml).")
@click.option("--llm", is_flag=True,
              help="Ask models.hook to fill input_filters and env_checks from each handler's prompt.")
@handle_errors
def compile_handlers_command(eval_yaml: Path, output: Path | None, llm: bool) -> None:
    """Write tool_handlers.yaml (the compiled inputs.tools) for review; runs use it as is."""
    from agent_eval_sandbox.interception import write_handlers

    click.echo(f"wrote {write_handlers(load_with_warnings(eval_yaml), output, llm=llm)}")


@cli.group()
def image() -> None:
    """Build the sandbox image (and, with no registry, its base)."""


@image.command("bootstrap-base")
@click.option("--suite", default="bookworm", show_default=True, help="Debian suite for debootstrap.")
@click.option("--mirror", help="Debian mirror (default: the host's apt source, else deb.debian.org).")
@handle_errors
def image_bootstrap_base(suite: str, mirror: str | None) -> None:
    """Make a local Debian base image with debootstrap + docker import (no registry needed; root)."""
    from rich.console import Console

    from agent_eval_sandbox.sandbox.bootstrap import bootstrap_base

    ref = bootstrap_base(suite=suite, mirror=mirror, console=Console(stderr=True))
    click.echo(ref)


@image.command("build")
@click.option("--base-image",
              help="BASE_IMAGE of the build (default: the bootstrapped base, else debian:bookworm-slim).")
@click.option("--claude-version", help="Claude Code version to bake in.")
@click.option("--image", "prebuilt", help="Use this prebuilt image as is (only checks it is present).")
@click.option("--rebuild", is_flag=True, help="Build even if an image of the same inputs exists.")
@click.option("--runtime", help="Build the variant for this container runtime (sandbox.runtime), e.g. a gVisor one.")
@click.option("--bootstrap-missing-base", is_flag=True,
              help="With no base image and no registry, make one with debootstrap first (as `run` does).")
@click.option("--controller", is_flag=True,
              help="Build the controller image (the top-level Dockerfile of this checkout) instead.")
@click.option("--tag", help="With --controller: the image's tag (default agent-eval-sandbox-controller:VERSION).")
@handle_errors
def image_build(base_image: str | None, claude_version: str | None, prebuilt: str | None, rebuild: bool,
                runtime: str | None, bootstrap_missing_base: bool, controller: bool, tag: str | None) -> None:
    """Build the sandbox image, unless one of the same inputs exists already (or, with --controller, the
    controller image). With -q, print only the image's ref."""
    quiet = verbosity.quiet()
    if controller:
        from agent_eval_sandbox.sandbox.controller_image import build_controller_image

        built = build_controller_image(base_image=base_image, tag=tag, no_cache=rebuild,
                                       console=verbosity.err_console())
        click.echo(built.ref if quiet else f"built {built.ref} from {built.base}")
        return
    if tag:
        raise click.UsageError("--tag applies to --controller only (the sandbox image is tagged by its inputs)")

    from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION
    from agent_eval_sandbox.sandbox.image import (
        ImageSettings,
        ensure_sandbox_image,
        exec_only_binaries,
    )

    settings = ImageSettings(image=prebuilt, base_image=base_image,
                             claude_version=claude_version or DEFAULT_CLAUDE_VERSION,
                             exec_only=exec_only_binaries(runtime))
    result = ensure_sandbox_image(settings, rebuild=rebuild, bootstrap_missing_base=bootstrap_missing_base,
                                  console=verbosity.err_console())
    if quiet:
        click.echo(result.ref)
    else:
        click.echo(f"built {result.ref}" if result.built else f"{result.ref} is up to date")


@cli.command()
@click.option("--all", "remove_all", is_flag=True, help="Remove every object this tool manages, not only orphans.")
@click.option("--images", is_flag=True,
              help="Also remove sandbox images built from inputs that changed since (not one a container uses; "
                   "Docker only).")
@click.option("--backend", default="docker", show_default=True, help="Sandbox backend (docker or kubernetes).")
@click.option("--namespace", help="Kubernetes: the namespace (default: the kubeconfig's, or the controller's own).")
@click.option("--runs-dir", help="Runs directory, where runs from a container leave their working directories "
              "(default $AGENT_EVAL_RUNS_DIR, else eval/runs).")
@click.option("--shared-dir", envvar="AGENT_EVAL_SHARED_DIR", type=click.Path(path_type=Path),
              help="The --shared-dir runs used, where they leave their working directories [AGENT_EVAL_SHARED_DIR].")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def gc(remove_all: bool, images: bool, backend: str, namespace: str | None, runs_dir: str | None,
       shared_dir: Path | None, as_json: bool) -> None:
    """Remove leftover sandboxes: orphans of dead runs (or, with --all, everything), and the working
    directories on this host of runs that were killed (in the temp, runs and shared directories)."""
    from agent_eval_sandbox.config.kubernetes_settings import check_namespace
    from agent_eval_sandbox.config.models import SandboxConfig
    from agent_eval_sandbox.sandbox.registry import backend_for

    if namespace and backend != "kubernetes":
        raise UserError("--namespace applies to --backend kubernetes only", fix="add --backend kubernetes")
    if images and backend != "docker":
        raise UserError("--images applies to --backend docker only (a cluster pulls its images from a registry)",
                        fix="drop --images, or add --backend docker")
    try:
        check_namespace(namespace)
    except ValueError as exc:
        raise UserError(str(exc).replace("sandbox.namespace", "--namespace"),
                        fix="give an existing namespace") from None
    # gc only lists and deletes: the image is never used.
    sandbox = SandboxConfig.model_validate(
        {"backend": backend, "namespace": namespace, "image": "unused"} if backend == "kubernetes" else
        {"backend": backend})
    # The host's directories first: they need no daemon, and a daemon that is down does not keep them.
    swept = _sweep_host_dirs(runs_dir, shared_dir)
    try:
        removed = swept + backend_for(sandbox).gc(all=remove_all)
    except UserError:
        for item in swept:
            click.echo(f"removed {item.kind} {item.name}: {item.reason}", err=True)
        raise
    image_gc = _gc_images() if images else None
    if image_gc is not None:
        removed += image_gc.removed
    if as_json:
        listed = [dataclasses.asdict(r) for r in removed]
        click.echo(json.dumps(listed if image_gc is None else {
            "removed": listed, "freed_bytes": image_gc.freed_bytes, "images_in_use": image_gc.kept_in_use}, indent=2))
        return
    for item in removed:
        owner = "" if item.kind in ("image", "directory") else f" (run {item.run_id}, case {item.case_id})"
        click.echo(f"removed {item.kind} {item.name}{owner}: {item.reason}")
    click.echo(f"{len(removed)} object(s) removed")
    if image_gc is not None:
        for tag in image_gc.kept_in_use:
            click.echo(f"kept image {tag}: a container uses it")
        click.echo(f"{image_gc.freed_bytes / 2**20:.1f} MiB freed")


def _sweep_host_dirs(runs_dir: str | None, shared_dir: Path | None) -> list[RemovedObject]:
    """The working directories runs made and left when killed (SIGKILL: no exit to clean up at), in every
    place a run puts them: the temp dir, the runs dir (a controller in a container), the shared dir."""
    import tempfile

    from agent_eval_sandbox.sandbox.base import RemovedObject
    from agent_eval_sandbox.sandbox.held_dirs import ABANDONED, sweep_abandoned

    bases = [Path(tempfile.gettempdir())]
    for base in (_runs_base(runs_dir), shared_dir):
        if base is not None:
            try:
                bases.append(base.absolute())
            except OSError:  # relative, and the current directory is gone: there is nothing there to sweep
                continue
    return [RemovedObject("directory", str(path), None, None, ABANDONED) for path in sweep_abandoned(bases)]


def _gc_images() -> ImageGcResult:
    from agent_eval_sandbox.sandbox.docker_errors import connect
    from agent_eval_sandbox.sandbox.image import current_image_tags
    from agent_eval_sandbox.sandbox.image_gc import remove_stale_images

    client = connect()
    return remove_stale_images(client, current_image_tags(client))


@cli.command("model-server")
@click.argument("script", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (0 picks one).")
@handle_errors
def model_server(script: Path, host: str, port: int) -> None:
    """Serve SCRIPT (a list of scripted model steps) as an Anthropic Messages API.

    Point ANTHROPIC_BASE_URL at the printed URL to run the real CLI, the SDK or
    a whole eval against it.
    """
    from agent_eval_sandbox.gateway.model_server import serve

    serve(script, host, port)


@cli.group()
def cassette() -> None:
    """Work with the cassettes of recorded runs (`run --record`)."""


@cassette.command("to-script")
@click.argument("cassette_path", metavar="CASSETTE", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Where to write (default: stdout).")
@click.option("--advance", type=click.Choice(["per_turn", "per_request"]),
              help="How the script picks its steps (default: per_turn when the recording allows it).")
@handle_errors
def cassette_to_script_command(cassette_path: Path, output: Path | None, advance: str | None) -> None:
    """Write CASSETTE (a cassette.jsonl, or a case directory holding one) as a model_script.yaml."""
    from agent_eval_sandbox.gateway.cassette import load_cassette
    from agent_eval_sandbox.gateway.script import Advance
    from agent_eval_sandbox.gateway.to_script import cassette_to_script
    from agent_eval_sandbox.rundir.layout import CaseDir

    path = CaseDir(cassette_path).cassette if cassette_path.is_dir() else cassette_path
    text = cassette_to_script(load_cassette(path), Advance(advance) if advance else None)
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output}", err=True)


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.argument("case_id", metavar="[CASE]", required=False)
@click.option("--runs-dir", help="Where `latest` is looked for (default $AGENT_EVAL_RUNS_DIR, else eval/runs).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def show(run_dir: Path, case_id: str | None, runs_dir: str | None, as_json: bool) -> None:
    """Print a case's conversation: turns, tool calls and results, final text, end reason, judges."""
    from rich.console import Console

    from agent_eval_sandbox.app.inspect_run import case_view, render_case

    view = case_view(_run_arg(run_dir, runs_dir), case_id)
    if as_json:
        click.echo(json.dumps(view, indent=2, default=str))
        return
    render_case(view, Console(soft_wrap=False))


@cli.command()
@click.option("--runs-dir", help="Runs directory (default $AGENT_EVAL_RUNS_DIR, else eval/runs).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def runs(runs_dir: str | None, as_json: bool) -> None:
    """List the runs (newest first): date, eval, pass/fail or interrupted, cases, cost."""
    from rich.console import Console

    from agent_eval_sandbox.app.inspect_run import render_runs, runs_view

    rows = runs_view(_runs_base(runs_dir))
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo(f"no runs under {_runs_base(runs_dir)}")
        return
    render_runs(rows, Console())


@cli.command()
@click.argument("directory", default=".", type=click.Path(path_type=Path))
@handle_errors
def init(directory: Path) -> None:
    """Write a starter eval into DIRECTORY (default .) that passes `run --offline` at once."""
    from agent_eval_sandbox.app.scaffold import write_scaffold
    from agent_eval_sandbox.config.schema import eval_schema

    written = write_scaffold(directory, schema_text=json.dumps(eval_schema(), indent=2) + "\n")
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"next: agent-eval-sandbox run {directory / 'eval.yaml'} --offline")


@cli.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Where to write (default: stdout).")
@handle_errors
def schema(output: Path | None) -> None:
    """Print the JSON Schema of eval.yaml (for the YAML language server: see the README)."""
    from agent_eval_sandbox.config.schema import eval_schema

    text = json.dumps(eval_schema(), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output}", err=True)


# Each running case holds sockets, pipes and log files; the usual soft limit of
# 1024 would be the first thing a busy run (or a hostile case) runs out of.
WANTED_OPEN_FILES = 65536


def raise_open_files_limit(wanted: int = WANTED_OPEN_FILES) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def exit_on_sigterm_as_pid_1() -> None:
    """As a container's main process (`docker run` without `--init`) the kernel drops a SIGTERM that has
    no handler: `docker stop` would wait, then SIGKILL. Exit as the signal would, running cleanups; a run
    in progress has its own handler, which removes its sandboxes first (sandbox/teardown.py)."""
    if os.getpid() != 1:
        return

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)


def main() -> None:
    exit_on_sigterm_as_pid_1()
    raise_open_files_limit()
    # Names and text from a sandbox need not be UTF-8: printing them must not crash the run.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    cli(prog_name="agent-eval-sandbox")


verbosity.add_options(cli)  # last: every command is defined by now
