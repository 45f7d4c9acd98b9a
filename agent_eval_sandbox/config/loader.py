"""Loading eval.yaml: normalisation, validation, warnings, one-line errors."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_eval_sandbox.config.advice import semantic_warnings, threshold_warnings
from agent_eval_sandbox.config.messages import validation_error
from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.config.yaml_reader import read_yaml_mapping

# Keys of the agent-eval-harness format that this project accepts but does not act on,
# by the path of their parent: key -> what the reference uses it for.
NOT_IMPLEMENTED: dict[tuple[str, ...], dict[str, str]] = {
    (): {
        "matrix": "matrix runs",
    },
}


@dataclass
class LoadedConfig:
    """A validated config, where it came from, and what the loader had to say."""

    config: EvalConfig
    path: Path
    warnings: list[str] = field(default_factory=list)
    # The working directory at load time: the reference's project root (config/paths.py).
    workdir: Path = field(default_factory=lambda: _working_directory())

    @property
    def root(self) -> Path:
        """This project's project root, the directory holding eval.yaml: the sandbox's resources,
        hooks and judge code are found there."""
        return self.path.parent

    @property
    def paths(self) -> ProjectPaths:
        """How each path-valued field resolves (config/paths.py)."""
        return ProjectPaths(config_dir=self.root, workdir=self.workdir)

    @property
    def dataset_dir(self) -> Path:
        return self.paths.dataset_dir(self.config.dataset.path)


def _working_directory() -> Path:
    try:
        return Path.cwd()
    except OSError:  # removed under us: no working directory to resolve from
        return Path(os.sep)


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
        raise validation_error(path, exc, data) from None
    if not config.name:
        config.name = path.stem
    warnings += _unknown_key_warnings({k: v for k, v in data.items() if k != "thresholds"}, config)
    warnings += threshold_warnings(data.get("thresholds"))
    warnings += semantic_warnings(config)
    return LoadedConfig(config=config, path=path.resolve(), warnings=[f"{path}: {w}" for w in warnings])
