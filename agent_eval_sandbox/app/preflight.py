"""Run-time preflight: what would break a run, found before anything starts.

The config's load-time checks (config/loader.py, judges/validate.py) see one
file at a time. These checks look at what a run will actually use, so that
`validate` fails where `run` would, and `run` fails before a sandbox starts:

- every skill the config runs resolves in the sandbox's CLI (app/skills.py);
- offline, every script the scripted models will play is valid
  (`model_script.yaml` per invocation, `hook_script.yaml`, `judge_script.yaml`),
  an invocation without a model script is said, and so is a model-script call
  of a tool the CLI does not have (app/claude_cli.py);
- no YAML file the run reads has a key written twice (the last one silently wins).

Errors raise `ConfigError` (one line naming the case, file, step and key);
what is only suspicious comes back as warnings, which `--strict` refuses.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval_sandbox.app.claude_cli import MEASURED_VERSION, TOOLS, is_cli_tool
from agent_eval_sandbox.app.skills import check_skill, command_catalog, named_skills
from agent_eval_sandbox.config import scripts
from agent_eval_sandbox.config.dataset import ANNOTATIONS_NAMES, ANSWERS_NAMES, Case, Dataset
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.yaml_reader import find_duplicate_keys
from agent_eval_sandbox.errors import ConfigError, UserError
from agent_eval_sandbox.gateway.script import Script, load_script
from agent_eval_sandbox.interception import HANDLERS_FILE_NAME
from agent_eval_sandbox.interception.settings import cleared_env_warnings
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.sandbox.claude_binary import DEFAULT_CLAUDE_VERSION


@dataclass
class Preflight:
    """What the checks found: warnings, and what was checked (for `validate`'s summary)."""

    warnings: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


def preflight(loaded: LoadedConfig, dataset: Dataset, invocations: list[Invocation], *, offline: bool,
              claude_version: str | None = None) -> Preflight:
    """Every run-time check; raises ConfigError on the first problem that would break the run."""
    result = Preflight()
    version = claude_version or loaded.config.sandbox.claude_version or DEFAULT_CLAUDE_VERSION
    _check_skills(loaded, version, result)
    result.warnings += duplicate_key_warnings(_read_files(loaded, dataset.cases))
    result.warnings += cleared_env_warnings(loaded.config)
    if offline:
        _check_scripts(loaded, invocations, result, claude_version=version)
    return result


def _check_skills(loaded: LoadedConfig, claude_version: str, result: Preflight) -> None:
    named = named_skills(loaded.config)
    if not named:
        return  # prompt mode: the prompt is the agent's input, there is nothing to resolve
    catalog = command_catalog(loaded.config, loaded.paths, claude_version=claude_version)
    for field_name, skill in named:
        found, warning = check_skill(catalog, skill, field=field_name, project_root=loaded.root,
                                     config_path=loaded.path, home=Path.home())
        if warning:
            result.warnings.append(warning)
        if found is not None:
            result.checked.append(f"skill /{skill}: {found.origin}")


def _read_files(loaded: LoadedConfig, cases: list[Case]) -> list[Path]:
    """The YAML files of the eval a run reads (besides scripts, checked offline)."""
    files = [loaded.path]
    if loaded.config.inputs.tools and (handlers := loaded.root / HANDLERS_FILE_NAME).is_file():
        files.append(handlers)  # used as is by the run
    for case in cases:
        files.append(case.input_file)
        files += [path for name in (*ANSWERS_NAMES, *ANNOTATIONS_NAMES) if (path := case.dir / name).is_file()]
    return files


def duplicate_key_warnings(paths: list[Path]) -> list[str]:
    return [f"{path}: {duplicate.describe()}" for path in paths for duplicate in find_duplicate_keys(path)]


def _label(invocation: Invocation, batch: bool) -> str:
    return "batch" if batch else f"case {invocation.id}"


def _check_script(path: Path, label: str, result: Preflight) -> Script:
    """Parse one script as the scripted model server will; its errors name `label` (the case)."""
    try:
        script = load_script(path)
    except UserError as exc:
        raise ConfigError(f"{label}: {exc.message}", fix=exc.fix) from None
    result.warnings += duplicate_key_warnings([path])
    return script


def unknown_tool_warnings(script: Script, label: str) -> list[str]:
    """Tool calls of an agent's script that the CLI will answer with "No such tool available"."""
    warnings = []
    for index, step in enumerate(script.steps):
        for call in step.calls:
            if not is_cli_tool(call.tool):
                close = difflib.get_close_matches(call.tool, sorted(TOOLS), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                where = f"{label}: {script.source}: steps[{index}] (step {index + 1})"
                warnings.append(f"{where}: tool {call.tool!r}{hint} is not a tool of Claude Code {MEASURED_VERSION}: "
                                "the CLI answers the call with 'No such tool available'")
    return warnings


def _check_scripts(loaded: LoadedConfig, invocations: list[Invocation], result: Preflight, *,
                   claude_version: str) -> None:
    """Every script an offline run would load, loaded now (a bad one would end its case as `error`)."""
    batch = loaded.config.is_batch
    missing: list[str] = []
    checked = 0
    for invocation in invocations:
        case_dirs = [case.dir for case in invocation.cases]
        model = scripts.model_script_path(case_dirs, loaded.dataset_dir, batch=batch)
        # A pipeline's step may have its own script; the case's answers the steps without one.
        own = [scripts.step_script_path(case_dirs[0], step_id) for step_id in loaded.config.execution.step_ids]
        for found in (path for path in [model, *own] if path.is_file()):
            script = _check_script(found, _label(invocation, batch), result)
            if claude_version == MEASURED_VERSION:  # other versions have other tools
                result.warnings += unknown_tool_warnings(script, _label(invocation, batch))
            checked += 1
        if not model.is_file() and not (own and all(path.is_file() for path in own)):
            missing.append(invocation.id)
        # A case's own hook script (batch mode uses only the one beside eval.yaml).
        own_hook = case_dirs[0] / scripts.HOOK_SCRIPT
        if not batch and own_hook.is_file():
            _check_script(own_hook, _label(invocation, batch), result)
            checked += 1
    for path in (scripts.hook_script_path(None, loaded.root), scripts.judge_script_path(loaded.root)):
        if path is not None and path.is_file():
            _check_script(path, f"{path.name} beside {loaded.path.name}", result)
            checked += 1
    checked += _check_agent_judge_scripts(loaded, invocations, result, claude_version=claude_version)
    result.checked.append(f"offline scripts: {checked} parsed")
    if missing:
        more = f" (+{len(missing) - 5})" if len(missing) > 5 else ""
        result.warnings.append(f"--offline: no {scripts.MODEL_SCRIPT} for {', '.join(missing[:5])}{more}; "
                               "the scripted model only answers with a note")
    llm_judges = [j.name for j in loaded.config.judges if j.kind == "llm"]
    if llm_judges and not scripts.judge_script_path(loaded.root).is_file():
        result.warnings.append(f"--offline: no {scripts.JUDGE_SCRIPT} beside {loaded.path.name}: the LLM judges "
                               f"({', '.join(llm_judges)}) get an error instead of a verdict")


def _check_agent_judge_scripts(loaded: LoadedConfig, invocations: list[Invocation], result: Preflight, *,
                               claude_version: str) -> int:
    """The script of every agent judge sample on every case (judge_scripts/), each file parsed once; a
    sample with none is a warning (offline, it becomes that judge's error on that case)."""
    judges = [j for j in loaded.config.judges if j.agent is not None]
    parsed: set[Path] = set()
    unplayed: list[str] = []
    for invocation in invocations:
        for case in invocation.cases:
            for judge in judges:
                for sample in range(1, max(1, judge.samples) + 1):
                    path = scripts.judge_agent_script_path(case.dir, loaded.root, judge.name, sample)
                    if path is None:
                        unplayed.append(f"{judge.name} on {case.id}" + (f" (sample {sample})" if sample > 1 else ""))
                    elif path not in parsed:
                        label = f"agent judge '{judge.name}'"
                        script = _check_script(path, label, result)
                        if claude_version == MEASURED_VERSION:  # its agent is the real CLI too
                            result.warnings += unknown_tool_warnings(script, label)
                        parsed.add(path)
    if unplayed:
        more = f" (+{len(unplayed) - 5})" if len(unplayed) > 5 else ""
        result.warnings.append(f"--offline: no {scripts.JUDGE_AGENT_SCRIPTS}/<judge>.yaml plays agent judge "
                               f"{', '.join(unplayed[:5])}{more}: that judge errors on that case")
    return len(parsed)
