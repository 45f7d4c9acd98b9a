"""Loading an eval for use: the config's own checks (config/loader.py), then the judges' (judges/validate.py).

The config layer knows the eval.yaml format; whether a builtin judge exists
or a check snippet compiles is the judges' business. Everything that loads an
eval to run, score or validate it goes through `load_checked`.
"""

from __future__ import annotations

from pathlib import Path

from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config
from agent_eval_sandbox.judges.validate import validate_judges


def load_checked(path: Path | str) -> LoadedConfig:
    """eval.yaml, validated by the config models and by the judges; raises ConfigError."""
    loaded = load_eval_config(path)
    warnings = validate_judges(loaded.config, paths=loaded.paths, source=loaded.path)
    loaded.warnings.extend(f"{loaded.path}: {warning}" for warning in warnings)
    return loaded
