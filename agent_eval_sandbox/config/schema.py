"""A JSON Schema of eval.yaml, generated from the config models, for editors (`agent-eval-sandbox schema`).

The models keep unknown keys (the loader warns, so an eval written for a newer
reference still loads); an editor should instead flag them while they are
typed, so every block here is closed (`additionalProperties: false`) except for
the reference keys this project accepts without acting on (config/loader.py's
NOT_IMPLEMENTED), which stay allowed. Validators the models run in Python
(a template's syntax, a judge's kind) are not expressible here: `validate`
remains the full check.
"""

from __future__ import annotations

import copy
from typing import Any

from agent_eval_sandbox.config.loader import NOT_IMPLEMENTED
from agent_eval_sandbox.config.models import EvalConfig

SCHEMA_ID = "https://agent-eval-sandbox.invalid/eval.schema.json"

# What each key means, by block (the `$defs` name) and field: shown by the editor on hover.
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "EvalConfig": {
        "name": "The eval's name: names its folder under the runs directory (default: the file's stem).",
        "description": "What the eval checks, for people.",
        "title": "The title of report.html.",
        "execution": "What each case runs: a skill or a prompt, timeouts, budget, parallelism.",
        "runner": "The agent CLI and its settings (claude-code).",
        "models": "Models of the skill under test, its subagents, the judges and the hook model.",
        "permissions": "Extra allow/deny rules for the agent's tools.",
        "dataset": "Where the cases are (one directory per case with input.yaml) and what each sees.",
        "inputs": "Tool interception: answers given to the agent's tool calls instead of running them.",
        "outputs": "Files (or tool calls) collected from each case's workspace for the judges.",
        "traces": "Which traces of the agent are kept.",
        "hooks": "Commands run around the run and each case (before_all, before_each, ...).",
        "judges": "The checks run on every case: check snippets, builtins, LLM rubrics, agents.",
        "thresholds": "Per judge: the bar the run must clear (min_pass_rate, min_mean, ...); a miss exits 1.",
        "reward": "One scalar per case for RL, from the judges' results.",
        "generation": "How cases are generated (reference feature; not run by agent-eval-sandbox).",
        "sandbox": "agent-eval-sandbox's own block: the container each case runs in and its limits.",
        "mlflow": "Experiment tracking: when present, each judged run is logged to MLflow (extra [mlflow]).",
        "matrix": "Matrix runs (reference key; accepted, not implemented here).",
    },
    "ExecutionConfig": {
        "mode": "case: one invocation per case; batch: one invocation for all cases.",
        "skill": "The skill under test, run as /<skill> <arguments>.",
        "prompt": "A prompt template instead of a skill ({field} from the case's input.yaml).",
        "arguments": "The skill's arguments, a template over the case's input ({name}, {task?}).",
        "timeout": "Seconds an invocation may run.",
        "max_budget_usd": "USD an invocation may spend on the model.",
        "parallelism": "Cases at once.",
        "env": "Environment of the agent (credentials and the model endpoint are never passed).",
        "steps": "Several invocations per case in the same sandbox, in order.",
    },
    "ModelsConfig": {
        "skill": "Model of the skill under test.",
        "subagent": "Model of its subagents.",
        "judge": "Model of the LLM judges.",
        "hook": "Model of the tool-interception hook.",
    },
    "DatasetConfig": {
        "path": "Directory of the cases, relative to eval.yaml.",
        "schema": "What a case's input and annotations hold, for people and generators.",
        "workspace": "Files of each case directory copied into its workspace.",
    },
    "JudgeConfig": {
        "name": "The judge's name: thresholds and reports use it.",
        "description": "What the judge checks.",
        "builtin": "A builtin judge by name (e.g. cost_budget).",
        "check": "Python body over `outputs`, returning (passed, reason) or a number.",
        "llm_rubric": "A rubric an LLM judges each case against.",
        "prompt": "The LLM judge's prompt.",
        "prompt_file": "A file holding the LLM judge's prompt.",
        "module": "A Python module holding the judge function.",
        "function": "The judge function in `module`.",
        "arguments": "Arguments of a builtin or module judge.",
        "if": "A condition over `outputs`: the judge runs only where it holds.",
        "samples": "How many times an LLM judge judges each case.",
        "step": "Judge only this step's results (execution.steps).",
    },
    "ThresholdConfig": {
        "min_mean": "The judge's mean value must reach this.",
        "min_pass_rate": "The share of cases the judge passes must reach this (0 to 1).",
        "min_win_rate": "Pairwise: the share of wins must reach this.",
        "max_error_rate": "The share of cases where the judge erred must stay under this.",
    },
    "MlflowConfig": {
        "experiment": "The MLflow experiment runs and traces are logged under (default: the eval's name).",
        "tracking_uri": "Where to log (default: $MLFLOW_TRACKING_URI, else http://127.0.0.1:5000); "
                        "sqlite:///mlflow.db needs no server.",
        "tags": "Tags set on every MLflow run of this eval.",
    },
    "SandboxConfig": {
        "image": "A prebuilt sandbox image to use as is.",
        "base_image": "The base the sandbox image is built from.",
        "claude_version": "The Claude Code version baked into the image.",
        "runtime": "The container runtime: crun, or a gVisor one; unset: the Docker daemon's default.",
        "cpus": "CPUs per case.",
        "memory": "Memory per case (e.g. 2g).",
        "pids": "Processes per case.",
        "gateway": "What the model gateway lets a case ask of the model API.",
    },
}


def eval_schema() -> dict[str, Any]:
    """eval.yaml's JSON Schema (draft 2020-12), closed against misspelt keys."""
    schema = copy.deepcopy(EvalConfig.model_json_schema(mode="validation", by_alias=True))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "eval.yaml (agent-eval-sandbox)"
    defs: dict[str, Any] = schema.get("$defs", {})
    for name, block in [("EvalConfig", schema), *defs.items()]:
        _close(block, DESCRIPTIONS.get(name, {}), NOT_IMPLEMENTED.get((), {}) if name == "EvalConfig" else {})
    return schema


def _close(block: dict[str, Any], descriptions: dict[str, str], accepted: dict[str, str]) -> None:
    properties = block.get("properties")
    if not isinstance(properties, dict):
        return
    for key, purpose in accepted.items():
        properties.setdefault(key, {"description": f"{purpose} (reference key; accepted, not implemented)"})
    for key, prop in properties.items():
        if key in descriptions:
            prop["description"] = descriptions[key]
        _allow_empty_block(prop)
    block["additionalProperties"] = False


def _allow_empty_block(prop: dict[str, Any]) -> None:
    """A block or list with every line commented out is YAML null; the loader takes it as absent."""
    if "$ref" in prop or prop.get("type") in ("array", "object"):
        inner = {k: prop.pop(k) for k in list(prop) if k not in ("description", "default", "title")}
        prop["anyOf"] = [inner, {"type": "null"}]
