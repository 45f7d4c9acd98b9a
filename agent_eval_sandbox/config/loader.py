"""Loading eval.yaml: normalisation, validation, warnings, one-line errors."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_eval_sandbox.config.models import (
    IMPLEMENTED_RUNNER_TYPES,
    THRESHOLD_KEYS,
    EvalConfig,
    JudgeConfig,
)
from agent_eval_sandbox.config.templating import check_syntax
from agent_eval_sandbox.config.yaml_reader import read_yaml_mapping
from agent_eval_sandbox.errors import ConfigError

# Keys of the agent-eval-harness format that this project accepts but does not act on,
# by the path of their parent: key -> what the reference uses it for.
NOT_IMPLEMENTED: dict[tuple[str, ...], dict[str, str]] = {
    (): {
        "mlflow": "experiment tracking",
        "generation": "dataset generation (/eval-dataset)",
        "reward": "RL reward composition",
        "matrix": "matrix runs",
    },
}


@dataclass
class LoadedConfig:
    """A validated config, where it came from, and what the loader had to say."""

    config: EvalConfig
    path: Path
    warnings: list[str] = field(default_factory=list)

    @property
    def root(self) -> Path:
        """The directory holding eval.yaml: relative paths resolve against it."""
        return self.path.parent

    def resolve(self, relative: str) -> Path:
        candidate = Path(relative).expanduser()
        return candidate if candidate.is_absolute() else (self.root / candidate)

    @property
    def dataset_dir(self) -> Path:
        return self.resolve(self.config.dataset.path or ".")


def _dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _clean_message(message: str) -> str:
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


_TYPE_NAMES = {"str", "int", "float", "bool", "none", "list", "dict"}


def _is_union_tag(part: Any) -> bool:
    # pydantic puts union members and validator names into `loc`
    # (e.g. ('permissions', 'deny', 0, 'PathRule', 'path')): they are not fields.
    return isinstance(part, str) and (
        part[:1].isupper() or "[" in part or "-" in part or part in _TYPE_NAMES
    )


def _validation_error(path: Path, exc: ValidationError) -> ConfigError:
    """The first pydantic error as one line naming the file and the field."""
    first = exc.errors(include_url=False)[0]
    loc = tuple(p for p in first["loc"] if not _is_union_tag(p))
    field_path = _dotted(loc)
    if first["type"] == "missing":
        return ConfigError(f"'{loc[-1]}' is required", file=path, field=_dotted(loc[:-1]) or None,
                           fix=f"add {field_path}")
    message = _clean_message(first["msg"])
    got = first.get("input")
    if not isinstance(got, (dict, list)):
        message += f" (got {got!r})"
    # Messages of our own validators already start with the dotted field name.
    named = "." in message.split(" ", 1)[0]
    return ConfigError(message, file=path, field=None if named or not field_path else field_path)


def _unknown_key_warnings(raw: Any, model: Any, where: tuple[str, ...] = ()) -> list[str]:
    """Warn about keys the model does not know, suggesting the closest one."""
    warnings: list[str] = []
    if isinstance(model, BaseModel) and isinstance(raw, dict):
        fields = type(model).model_fields
        by_key = {(info.alias or name): name for name, info in fields.items()}
        for key, value in raw.items():
            if key in by_key:
                warnings += _unknown_key_warnings(value, getattr(model, by_key[key]), (*where, key))
                continue
            dotted = ".".join((*where, str(key)))
            purpose = NOT_IMPLEMENTED.get(where, {}).get(key)
            if purpose:
                warnings.append(f"'{dotted}' ({purpose}) is not implemented by agent-eval-sandbox; ignored")
                continue
            close = difflib.get_close_matches(str(key), list(by_key), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            warnings.append(f"unknown key '{dotted}'{hint}; ignored")
    elif isinstance(model, list) and isinstance(raw, list):
        for index, (raw_item, item) in enumerate(zip(raw, model, strict=False)):
            label = (*where[:-1], f"{where[-1]}[{index}]") if where else (f"[{index}]",)
            warnings += _unknown_key_warnings(raw_item, item, label)
    elif isinstance(model, dict) and isinstance(raw, dict):
        for key, item in model.items():
            if isinstance(item, BaseModel):
                warnings += _unknown_key_warnings(raw.get(key), item, (*where, str(key)))
    return warnings


def _semantic_warnings(config: EvalConfig) -> list[str]:
    """The reference's load-time warnings about valid but surprising configs."""
    warnings = _mode_warnings(config)
    for judge in config.judges:
        warnings += _judge_warnings(judge)
    warnings += _threshold_name_warnings(config)
    return warnings


def _mode_warnings(config: EvalConfig) -> list[str]:
    """Settings that the batch or repo workspace mode, or the runner type, makes inert."""
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
    if config.runner.type not in IMPLEMENTED_RUNNER_TYPES:
        warnings.append(
            f"runner.type '{config.runner.type}' is not implemented by agent-eval-sandbox "
            "(only claude-code runs in the sandbox); `run` will refuse this config"
        )
    return warnings


def _judge_warnings(judge: JudgeConfig) -> list[str]:
    """What one judge declares that will be skipped, ignored or scored differently than it may seem."""
    kind = judge.kind
    if judge.name == "pairwise":
        return ["judge 'pairwise' (A/B comparison) is not implemented; ignored"]
    warnings: list[str] = []
    if kind == "agent":
        warnings.append(
            f"judge '{judge.name}' uses 'agent' (tool-using agent judges), which is not "
            "implemented; it will be skipped"
        )
    elif kind == "skip":
        warnings.append(f"judge '{judge.name}' sets none of builtin/check/prompt/"
                        "prompt_file/llm_rubric/module+function; it will be skipped")
    elif kind == "llm" and not judge.is_bool and judge.score_range is None:
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


def _threshold_key_warnings(thresholds: Any) -> list[str]:
    # Thresholds are stored as-is by the reference; a typo silently does nothing there.
    # We keep that behaviour but say so, since a gate that never runs is a CI hole.
    warnings = []
    if isinstance(thresholds, dict):
        for judge, checks in thresholds.items():
            if isinstance(checks, dict):
                for key in checks:
                    if key not in THRESHOLD_KEYS:
                        close = difflib.get_close_matches(str(key), THRESHOLD_KEYS, n=1, cutoff=0.6)
                        hint = f" (did you mean '{close[0]}'?)" if close else ""
                        warnings.append(f"unknown key 'thresholds.{judge}.{key}'{hint}; ignored")
    return warnings


def normalize_raw(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Apply the reference's normalisations before validation (pure)."""
    data = dict(raw)
    warnings: list[str] = []
    if "skill" in data:
        top = data.pop("skill")
        execution = data.get("execution")
        execution = dict(execution) if isinstance(execution, dict) else {}
        warnings.append("top-level 'skill' is deprecated; it was moved into execution.skill")
        if top and not execution.get("skill"):
            execution["skill"] = top
        elif top and execution.get("skill") != top:
            warnings.append("top-level 'skill' ignored: execution.skill is already set")
        data["execution"] = execution
    return data, warnings


def load_eval_config(path: Path | str) -> LoadedConfig:
    """Read, normalise and validate an eval.yaml; raise ConfigError on bad input."""
    path = Path(path)
    if path.is_dir():
        path = path / "eval.yaml"
    raw = read_yaml_mapping(path, what="eval.yaml")
    data, warnings = normalize_raw(raw)
    try:
        config = EvalConfig.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(path, exc) from None
    if not config.name:
        config.name = path.stem
    for key in ("arguments", "prompt"):
        problem = check_syntax(getattr(config.execution, key))
        if problem:
            raise ConfigError(problem, file=path, field=f"execution.{key}", fix="fix the template")
    warnings += _unknown_key_warnings({k: v for k, v in data.items() if k != "thresholds"}, config)
    warnings += _threshold_key_warnings(data.get("thresholds"))
    warnings += _semantic_warnings(config)
    return LoadedConfig(config=config, path=path.resolve(), warnings=[f"{path}: {w}" for w in warnings])
