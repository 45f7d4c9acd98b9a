"""Load-time warnings: configs that are valid but will not do what they seem to (pure).

The reference's own warnings (per-case hooks in batch mode, a numeric judge
without score_range, samples on a deterministic judge, the two reward
warnings) and ours about what this project does not act on yet. Warnings are
data: the CLI prints them, and `validate --strict` refuses a config that has any.
"""

from __future__ import annotations

import difflib
from typing import Any

from agent_eval_sandbox.config.models import (
    IMPLEMENTED_RUNNER_TYPES,
    PAIRWISE,
    STEP_PHASES,
    THRESHOLD_KEYS,
    EvalConfig,
    JudgeConfig,
    RunnerConfig,
)


def semantic_warnings(config: EvalConfig) -> list[str]:
    """The reference's load-time warnings about valid but surprising configs, and ours."""
    warnings = _mode_warnings(config)
    warnings += _runner_warnings(config.runner, "runner")
    warnings += _step_warnings(config)
    for index, judge in enumerate(config.judges):
        warnings += _judge_warnings(judge, config, index)
    warnings += _threshold_name_warnings(config)
    warnings += _reward_warnings(config)
    if config.generation is not None:
        warnings.append("'generation' (dataset generation, /eval-dataset) is validated but not used by "
                        "agent-eval-sandbox, which runs existing datasets; ignored")
    return warnings


def _mode_warnings(config: EvalConfig) -> list[str]:
    """Settings that the batch or repo workspace mode makes inert."""
    warnings: list[str] = []
    hooks = config.hooks
    if config.is_batch and (hooks.before_each or hooks.after_each):
        warnings.append(
            "hooks.before_each, after_each ignored in batch mode "
            "(per-case hooks only run in case/prompt mode)"
        )
    elif config.is_repo_mode and (hooks.before_each or hooks.after_each):
        warnings.append(
            "hooks.before_each, after_each ignored with runner.workspace_mode: repo "
            "(per-case hooks only run in isolated case workspaces)"
        )
    if config.is_batch and config.dataset.workspace.files:
        warnings.append("dataset.workspace.files is ignored in batch mode (one shared workspace)")
    return warnings


def _runner_warnings(runner: RunnerConfig, where: str) -> list[str]:
    if runner.type in IMPLEMENTED_RUNNER_TYPES:
        return []
    warnings = [
        f"{where}.type '{runner.type}' is not implemented by agent-eval-sandbox "
        "(only claude-code runs in the sandbox); `run` will refuse this config"
    ]
    if runner.type == "cli" and not runner.command:
        warnings.append(f"{where}.command is required by runner.type cli (the command template to run)")
    return warnings


def _step_warnings(config: EvalConfig) -> list[str]:
    execution = config.execution
    warnings: list[str] = []
    step_hooks = [phase for phase in STEP_PHASES if config.hooks.phase(phase)]
    if execution.steps:
        if execution.arguments:
            warnings.append("execution.arguments is ignored with execution.steps (each step has its own arguments)")
        for index, step in enumerate(execution.steps):
            if step.runner is not None:
                warnings += _runner_warnings(step.runner, f"execution.steps[{index}].runner")
    elif step_hooks:
        warnings.append(f"hooks.{', '.join(step_hooks)} ignored: they wrap the steps of execution.steps, "
                        "and there are none")
    return warnings


def _judge_warnings(judge: JudgeConfig, config: EvalConfig, index: int) -> list[str]:
    """What one judge declares that will be skipped, ignored or scored differently than it may seem."""
    kind = judge.kind
    if judge.name == PAIRWISE:
        return []  # not scored per case: it judges a run against its baseline (compare/pairwise.py)
    warnings: list[str] = []
    if kind == "agent":
        warnings += _agent_warnings(judge, config, index)
    elif kind == "skip":
        warnings.append(f"judge '{judge.name}' sets none of builtin/check/prompt/"
                        "prompt_file/llm_rubric/module+function; it will be skipped")
    if kind in ("llm", "agent") and not judge.is_bool and judge.score_range is None:
        warnings.append(
            f"Judge '{judge.name}': numeric judge has no 'score_range', so it is scored on the "
            "unenforced [1, 5] default — declare one to have the returned value checked"
        )
    if judge.samples > 1 and kind in ("check", "code"):
        warnings.append(f"Judge '{judge.name}': samples is ignored for deterministic judges")
    if judge.feedback_type is not None and judge.feedback_type not in ("bool", "int", "float"):
        warnings.append(
            f"Judge '{judge.name}': feedback_type '{judge.feedback_type}' is not bool/int/float; "
            "it is scored as a number"
        )
    return warnings


def _agent_warnings(judge: JudgeConfig, config: EvalConfig, index: int) -> list[str]:
    agent = judge.agent
    assert agent is not None
    where = f"judges[{index}].agent"
    warnings = _runner_warnings(agent.runner, f"{where}.runner")
    if agent.inputs is not None:
        names = {o.path for o in config.outputs if o.path} | {o.name for o in config.outputs if o.path}
        for position, entry in enumerate(agent.inputs):
            name = entry.rstrip("/")
            if name not in (".", "") and name not in names:
                warnings.append(f"{where}.inputs[{position}] {entry!r} names no outputs[].path of this eval; "
                                f"nothing is staged for it (judge '{judge.name}')")
    return warnings


def _threshold_name_warnings(config: EvalConfig) -> list[str]:
    """Thresholds whose judge name matches no judge: their gate would never run."""
    warnings: list[str] = []
    judge_names = {j.name for j in config.judges}
    for name in config.thresholds:
        if name not in judge_names:
            close = difflib.get_close_matches(name, list(judge_names), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            warnings.append(f"thresholds.{name} names no judge{hint}; it is skipped")
    return warnings


def threshold_warnings(thresholds: Any) -> list[str]:
    """Entries and keys the reference stores as-is and never checks: we keep that, but say so,
    since a gate that never runs is a CI hole."""
    warnings: list[str] = []
    if not isinstance(thresholds, dict):
        return warnings
    for judge, checks in thresholds.items():
        if not isinstance(checks, dict):
            number = isinstance(checks, (int, float)) and not isinstance(checks, bool)
            example = checks if number else 0.8
            rate = (f" or `{judge}: {{min_pass_rate: {example}}}` for a pass/fail one"
                    if 0 <= example <= 1 else "")
            warnings.append(
                f"thresholds.{judge} is {checks!r}, not a mapping of checks, so it gates nothing; write "
                f"`{judge}: {{min_mean: {example}}}` for a numeric judge{rate}"
            )
            continue
        for key in checks:
            if key not in THRESHOLD_KEYS:
                close = difflib.get_close_matches(str(key), THRESHOLD_KEYS, n=1, cutoff=0.6)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                warnings.append(f"unknown key 'thresholds.{judge}.{key}'{hint}; ignored")
    return warnings


def _reward_warnings(config: EvalConfig) -> list[str]:
    reward = config.reward
    if reward is None:
        return []
    warnings: list[str] = []
    judges = {j.name: j for j in config.scored_judges}
    if reward.normalize and reward.mode != "judge":
        warnings.append("reward.normalize only applies with reward.judge; ignored in formula mode")
    if reward.weights and reward.mode == "expression":
        warnings.append("reward.weights are only used by formula: weighted; ignored with an expression")
    if reward.mode == "judge" and reward.judge in judges and not reward.normalize:
        scale = judges[reward.judge].score_range
        if scale is not None and tuple(scale) != (0.0, 1.0):
            low, high = float(scale[0]), float(scale[1])
            effect = ("every score at or above 1 becomes the maximum reward" if high > 1
                      else f"it can never exceed {high}")
            warnings.append(
                f"reward.judge '{reward.judge}' declares score_range [{low}, {high}] but 'normalize' is not "
                f"set, so its value is clamped to [0, 1] — {effect}. Set 'normalize: true' to map it from "
                f"[{low}, {high}]."
            )
    if reward.score_range is not None:
        warnings += _shadowed_reward_range(config)
    return warnings


def _shadowed_reward_range(config: EvalConfig) -> list[str]:
    """reward.score_range is a deprecated fallback: say which composed judges' own range wins over it."""
    reward = config.reward
    assert reward is not None and reward.score_range is not None
    if reward.mode == "judge" and not reward.normalize:
        return []
    fallback = (float(reward.score_range[0]), float(reward.score_range[1]))
    composed = [name for _, name in reward.judge_names() if name not in reward.raw]
    judges = {j.name: j for j in config.scored_judges}
    shadowed, still = [], []
    for name in dict.fromkeys(composed):
        own = judges[name].score_range if name in judges else None
        if own is None:
            still.append(name)
        elif (float(own[0]), float(own[1])) != fallback:
            shadowed.append(f"'{name}' [{float(own[0])}, {float(own[1])}]")
    if not shadowed:
        return []
    tail = (f" It still applies to {', '.join(repr(n) for n in still)}; drop it once every composed judge "
            "declares a 'score_range'." if still else " Drop it.")
    return [f"reward.score_range [{fallback[0]}, {fallback[1]}] is deprecated and no longer normalizes "
            f"{', '.join(shadowed)}: a judge's own 'score_range' wins.{tail}"]
