"""A case's pipeline (`execution.steps`), planned and templated (pure).

    plans = plan_steps(config, settings, host_environ)           # once per run
    prompt = step_prompt(plan, case, earlier, eval_file)          # per step, after the steps before it
    limits = step_limits(plan, case_left_s=..., case_left_usd=...)

Each step is its own `claude -p` in the case's sandbox and workspace. What a
later step's template sees of an earlier one (`steps.<id>`) is a `StepView`:
its final answer as the gateway vouched for it, its exit code, and `files`,
the workspace paths (relative to the workspace, sorted) the step added or
modified — measured between the start of its agent and its end, so what its
before_step/after_step hooks wrote is not the step's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.dataset import Case
from agent_eval_sandbox.config.env import resolve_env
from agent_eval_sandbox.config.models import EvalConfig, StepConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.config.templating import render_template
from agent_eval_sandbox.errors import TemplateError
from agent_eval_sandbox.rundir.models import EndReason, StepOutcome


@dataclass(frozen=True)
class StepPlan:
    """One step, everything but its prompt known before the case starts."""

    index: int
    id: str
    skill: str
    template: str  # its arguments (skill) or its prompt
    config: EvalConfig  # the eval with the step's runner block merged over the top-level one
    env: dict[str, str]  # execution.env with the step's env over it, resolved from the host's
    timeout_s: float  # its own deadline (else the case's)
    budget_usd: float  # its own cap (else the case's)
    on_failure: str

    @property
    def field(self) -> str:
        return f"execution.steps[{self.index}].{'arguments' if self.skill else 'prompt'}"


def plan_steps(config: EvalConfig, settings: RunSettings, host_environ: Mapping[str, str]) -> list[StepPlan]:
    return [_plan(index, step, config, settings, host_environ) for index, step in enumerate(config.execution.steps)]


def _plan(index: int, step: StepConfig, config: EvalConfig, settings: RunSettings,
          host_environ: Mapping[str, str]) -> StepPlan:
    step_config = config
    if step.runner is not None:
        runner = config.runner.model_copy(update=step.runner.set_fields)
        step_config = config.model_copy(update={"runner": runner})
    env = {**resolve_env(config.execution.env, host_environ), **resolve_env(step.env, host_environ)}
    return StepPlan(
        index=index,
        id=step.id,
        skill=step.skill,
        template=step.template,
        config=step_config,
        env=env,
        timeout_s=float(step.timeout if step.timeout is not None else settings.timeout_s),
        budget_usd=float(step.max_budget_usd if step.max_budget_usd is not None else settings.max_budget_usd),
        on_failure=step.on_failure,
    )


@dataclass(frozen=True)
class StepView:
    """An earlier step as `{{ steps.<id> }}` shows it."""

    output: str
    exit_code: int | None
    files: tuple[str, ...]

    @classmethod
    def of(cls, outcome: StepOutcome) -> StepView:
        return cls(outcome.result or "", outcome.exit_code, tuple(outcome.files))

    def as_template(self) -> dict[str, Any]:
        return {"output": self.output, "exit_code": self.exit_code, "files": list(self.files)}


def step_prompt(plan: StepPlan, case: Case, earlier: Mapping[str, StepView], eval_file: Path | None = None) -> str:
    """What the step's CLI is sent: `/skill arguments` or the prompt, rendered for the case with
    the steps before it. A template error names the case's input file, the step's field and eval.yaml."""
    return _render(plan.id, plan.skill, plan.template, plan.field, case, earlier, eval_file)


def _render(step_id: str, skill: str, template: str, field: str, case: Case, earlier: Mapping[str, StepView],
            eval_file: Path | None) -> str:
    try:
        rendered = render_template(template, case.input, {key: view.as_template() for key, view in earlier.items()})
    except TemplateError as exc:
        where = f"{eval_file}: {field}" if eval_file is not None else field
        raise TemplateError(f"{case.input_file}: case {case.id}: step {step_id}: {exc.message} (template: {where})",
                            fix=exc.fix) from None
    return f"/{skill} {rendered}".strip() if skill else rendered


# Before anything runs, every step's template is rendered with stand-ins for the steps before it:
# what a case's input.yaml lacks is found at planning, not after the first steps spent money.
_STAND_IN = StepView(output="(stand-in)", exit_code=0, files=("(stand-in)",))


def check_step_templates(config: EvalConfig, case: Case, eval_file: Path | None = None) -> str:
    """Render every step's template for `case` (earlier steps stood in for); the first step's prompt."""
    prompts = []
    for index, step in enumerate(config.execution.steps):
        field = f"execution.steps[{index}].{'arguments' if step.skill else 'prompt'}"
        earlier = {s.id: _STAND_IN for s in config.execution.steps[:index]}
        prompts.append(_render(step.id, step.skill, step.template, field, case, earlier, eval_file))
    return prompts[0] if prompts else ""


@dataclass(frozen=True)
class StepLimits:
    timeout_s: float
    budget_usd: float
    # The step's deadline is the case's own: reaching it ends the case (the sandbox is frozen);
    # an earlier deadline of the step's own stops only the step's command.
    case_deadline: bool


def step_limits(plan: StepPlan, *, case_left_s: float, case_left_usd: float) -> StepLimits:
    """The step's deadline and cap: its own, within what is left of the case's."""
    left_s, left_usd = max(case_left_s, 0.0), max(case_left_usd, 0.0)
    return StepLimits(min(plan.timeout_s, left_s), min(plan.budget_usd, left_usd), plan.timeout_s >= left_s)


def changed_files(before: Mapping[str, tuple[int, str]], after: Mapping[str, tuple[int, str]]) -> list[str]:
    """Paths added or modified between two listings of the workspace ({path: (size, mtime)})."""
    return sorted(path for path, stat in after.items() if before.get(path) != stat)


def parse_listing(raw: bytes) -> dict[str, tuple[int, str]]:
    """`find -printf '%s %T@ %P\\0'` output as {path: (size, mtime)}; a malformed entry is skipped."""
    listing: dict[str, tuple[int, str]] = {}
    for entry in raw.split(b"\0"):
        parts = entry.split(b" ", 2)
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2]:
            continue
        listing[parts[2].decode("utf-8", "surrogateescape")] = (int(parts[0]), parts[1].decode("ascii", "replace"))
    return listing


def skipped_step(plan: StepPlan, why: str) -> StepOutcome:
    """The record of a step that never started."""
    return StepOutcome(step_id=plan.id, index=plan.index, on_failure=plan.on_failure, skipped=why, end_reason="error")


# A step that ends so stops the pipeline whatever its on_failure: the tool's plumbing failed,
# the run was stopped, or a hook that must not fail did.
HARD_STOPS = frozenset({"interrupted", "infra_error", "hook_failed"})


def stops_pipeline(outcome: StepOutcome) -> str | None:
    """Why no later step runs after this one (by the step's own ending and on_failure), or None.
    The case's deadline and budget are the loop's to check."""
    if outcome.end_reason in HARD_STOPS:
        return f"step {outcome.step_id} ended {outcome.end_reason}"
    if outcome.failed and outcome.on_failure == "fail":
        what = f"exit code {outcome.exit_code}" if outcome.completed else outcome.end_reason
        return f"step {outcome.step_id} failed ({what}) and its on_failure is fail"
    return None


@dataclass(frozen=True)
class PipelineEnding:
    end_reason: EndReason
    exit_code: int | None


def pipeline_ending(steps: Sequence[StepOutcome], hard_stop: StepOutcome | None = None,
                    cut: EndReason | None = None) -> PipelineEnding:
    """How the case ended, from its steps.

    A failed `on_failure: continue` step is tolerated by design: it shows in `steps`, not in the
    case's ending — unless it is where the case's deadline or budget stopped the pipeline
    (`hard_stop`). Of the others, the first that did not end by itself gives the case's end
    reason, and the first non-zero exit code is the case's. A pipeline `cut` short (steps left
    unstarted by the case's deadline or budget, or an interrupt) ends so even if every step
    that ran ended by itself. No step started: an error.
    """
    started = [s for s in steps if s.skipped is None]
    if not started:
        return PipelineEnding("error", None)
    counted = [s for s in started if s.on_failure == "fail" or s is hard_stop]
    stopped = next((s for s in counted if not s.completed), None)
    codes = [s.exit_code for s in counted if s.exit_code not in (None, 0)]
    if codes:
        exit_code: int | None = codes[0]
    else:
        exit_code = stopped.exit_code if stopped is not None else 0
    reason: EndReason = stopped.end_reason if stopped is not None else "exited"
    return PipelineEnding(cut if cut is not None and reason == "exited" else reason, exit_code)


@dataclass(frozen=True)
class PipelineTotals:
    """The case-level numbers of a pipeline, from the steps that started."""

    agent_duration_s: float | None
    cli_token_usage: dict[str, int]
    cli_cost_usd: float | None
    num_turns: int | None
    permission_denials: list[dict[str, Any]]
    limits_hit: list[str]
    session_id: str | None
    result: str | None
    integrity: dict[str, Any]


def pipeline_totals(steps: Sequence[StepOutcome]) -> PipelineTotals:
    """Sums over the steps; the session and the final answer are the last step's that ran.
    The integrity check holds for the case only if it held for every step."""
    ran = [s for s in steps if s.ran]
    usage: dict[str, int] = {}
    for step in ran:
        for key, value in step.token_usage.items():
            usage[key] = usage.get(key, 0) + int(value)
    costs = [s.cli_cost_usd for s in ran if s.cli_cost_usd is not None]
    turns = [s.num_turns for s in ran if s.num_turns is not None]
    findings = [{**f, "step": s.step_id} for s in ran for f in s.integrity.findings]
    return PipelineTotals(
        agent_duration_s=round(sum(s.agent_duration_s or 0.0 for s in ran), 3) if ran else None,
        cli_token_usage=usage,
        cli_cost_usd=round(sum(costs), 6) if costs else None,
        num_turns=sum(turns) if turns else None,
        permission_denials=[d for s in ran for d in s.permission_denials],
        limits_hit=list(dict.fromkeys(limit for s in ran for limit in s.limits_hit)),
        session_id=ran[-1].session_id if ran else None,
        result=ran[-1].result if ran else None,
        integrity={"checked": bool(ran) and all(s.integrity.checked for s in ran),
                   "dropped": sum(s.integrity.dropped for s in ran),
                   "unverified": sum(s.integrity.unverified for s in ran),
                   "findings": findings[:200]},
    )
