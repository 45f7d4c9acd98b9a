"""Typed models of `eval.yaml` (agent-eval-harness format) plus our `sandbox:` block.

Field names, defaults and load-time rules follow the agent-eval-harness
reference (shared/reference/agent-eval-harness); docs/validation.md lists every
rule with where it is enforced and its test. Keys this project does not
implement are kept on the model (`extra="allow"`) and reported by the loader
as warnings; the loader also turns validation errors into one-line
`ConfigError`s naming the file, the field and the judge, hook or step.

Validators raise `RuleError` (a ValueError) whose message is a predicate —
"must be one of [...]" — and whose `field` is relative to the block that
raised it, so the loader can say exactly where the problem is.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from agent_eval_sandbox.config import kubernetes_settings as k8s
from agent_eval_sandbox.config import paths
from agent_eval_sandbox.config.reward_formula import formula_names, formula_problem
from agent_eval_sandbox.config.templating import check_syntax
from agent_eval_sandbox.rundir.layout import CASE_RECORD_NAMES
from agent_eval_sandbox.sandbox import defaults
from agent_eval_sandbox.sandbox.defaults import parse_size

EXECUTION_MODES = ("case", "batch")
CLAUDE_EFFORTS = ("low", "medium", "high", "xhigh", "max")
CODEX_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
PERMISSION_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions")
RUNNER_TYPES = ("claude-code", "codex", "cli", "responses-api")
IMPLEMENTED_RUNNER_TYPES = ("claude-code",)
RUN_PHASES = ("before_all", "before_scoring", "after_all", "before_report")
PER_CASE_PHASES = ("before_each", "after_each")
STEP_PHASES = ("before_step", "after_step")
HOOK_PHASES = ("before_all", "before_each", "before_step", "after_step", "after_each", "before_scoring",
               "after_all", "before_report")
THRESHOLD_KEYS = ("min_mean", "min_pass_rate", "min_win_rate", "max_error_rate")
GENERATION_STRATEGIES = ("skill", "synthetic", "from-traces")
DEFAULT_HOOK_MODEL = "claude-haiku-4-5-20251001"
DEFAULT_AGENT_JUDGE_TOOLS = ("Read", "Grep", "Glob")
DEFAULT_AGENT_JUDGE_BUDGET_USD = 2.0
DEFAULT_AGENT_JUDGE_TIMEOUT_S = 600
PAIRWISE = "pairwise"

# Runtime defaults the reference applies only at run time (the config keeps None).
DEFAULT_TIMEOUT_S = 3600
DEFAULT_MAX_BUDGET_USD = 100.0
DEFAULT_PARALLELISM = 1

# A step id names `{{ steps.<id> }}`, a judge's `step:` and a directory of the case's record.
STEP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")
_STEP_REFERENCE = re.compile(r"\bsteps\s*(?:\.\s*([A-Za-z0-9_]+)|\[\s*['\"]([^'\"]+)['\"]\s*\])")


class RuleError(ValueError):
    """A load-time rule broken inside a block.

    `message` is a predicate ("must be one of [...]"); `field` is the dotted
    path of the offending key relative to the block that raised it (None: the
    block itself, or the field whose validator raised it); `fix` how to fix it.
    """

    def __init__(self, message: str, *, field: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.fix = fix


class Model(BaseModel):
    """Base for every block: unknown keys are kept (the loader warns about them)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_default=True)


def _scalar_to_str(value: Any) -> Any:
    # YAML turns `DELAY: 100` into an int; env values are strings, so coerce scalars.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _coerce_env(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _scalar_to_str(v) for k, v in value.items()}
    return value


def _whole_number(minimum: int) -> Any:
    def check(value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            what = "a positive whole number" if minimum == 1 else f"a whole number of at least {minimum}"
            raise RuleError(f"must be {what}")
        return value

    return BeforeValidator(check)


def _none_is_empty_list(value: Any) -> Any:
    return [] if value is None else value


def _none_is_empty_map(value: Any) -> Any:
    return {} if value is None else value


def _score_range(value: Any) -> Any:
    if value is None:
        return None
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        or not all(math.isfinite(v) for v in value)
        or not value[0] < value[1]
    ):
        raise RuleError("must be a two-element increasing numeric list [min, max]",
                        fix="write it as [min, max] with min < max, e.g. [1, 5]")
    return value


EnvMap = Annotated[dict[str, str], BeforeValidator(_coerce_env)]
PositiveInt = Annotated[int, _whole_number(1)]
ScoreRange = Annotated[tuple[float, float] | None, BeforeValidator(_score_range)]
StrList = Annotated[list[str], BeforeValidator(_none_is_empty_list)]


def _check_path(value: str, **rule: bool) -> str:
    problem = paths.relative_problem(value, **rule)
    if problem:
        raise RuleError(f"{problem} (got {value!r})")
    return value


def _check_paths(values: list[str], **rule: bool) -> list[str]:
    for index, value in enumerate(values):
        problem = paths.relative_problem(value, **rule)
        if problem:
            raise RuleError(f"{problem} (got {value!r})", field=f"[{index}]")
    return values


def _check_skill(value: str, field: str | None = None) -> str:
    problem = paths.skill_name_problem(value) if value else None
    if problem:
        raise RuleError(f"{problem} (got {value!r})", field=field)
    return value


def _check_template(value: str, field: str | None = None) -> str:
    problem = check_syntax(value)
    if problem:
        raise RuleError(problem, field=field, fix="fix the template")
    return value


# --- execution ----------------------------------------------------------------------------


class RunnerConfig(Model):
    type: str = "claude-code"
    effort: str | None = None
    permission_mode: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    plugin_dirs: StrList = Field(default_factory=list)
    env: EnvMap = Field(default_factory=dict)
    system_prompt: str = ""
    command: str | list[str] | None = None
    workspace_mode: Literal["repo"] | None = None

    @field_validator("settings", mode="before")
    @classmethod
    def _none_settings(cls, value: Any) -> Any:
        return _none_is_empty_map(value)

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        if value not in RUNNER_TYPES:
            raise RuleError(f"must be one of {list(RUNNER_TYPES)}")
        return value

    @field_validator("workspace_mode", mode="before")
    @classmethod
    def _workspace_mode(cls, value: Any) -> Any:
        if value is not None and value != "repo":
            raise RuleError("must be unset or 'repo'")
        return value

    @field_validator("plugin_dirs")
    @classmethod
    def _plugin_dirs(cls, value: list[str]) -> list[str]:
        # The reference lets an absolute or `../` path through as an explicit opt-in.
        for index, entry in enumerate(value):
            if not entry.strip() or "\x00" in entry:
                raise RuleError(f"must name a directory (got {entry!r})", field=f"[{index}]")
        return value

    @model_validator(mode="after")
    def _runtime_enums(self) -> RunnerConfig:
        # The reference validates these only for the runtimes that read them.
        efforts = {"claude-code": CLAUDE_EFFORTS, "codex": CODEX_EFFORTS}.get(self.type)
        if efforts is not None:
            if self.effort is not None and self.effort not in efforts:
                raise RuleError(f"must be one of {list(efforts)} for runner.type {self.type}", field="effort")
            if self.permission_mode is not None and self.permission_mode not in PERMISSION_MODES:
                raise RuleError(f"must be one of {list(PERMISSION_MODES)}", field="permission_mode")
        if self.type == "codex" and self.workspace_mode == "repo":
            raise RuleError("cannot be 'repo' with runner.type codex (it cannot protect the repository's "
                            "answer key there)", field="workspace_mode", fix="use the isolated workspace")
        return self

    @property
    def set_fields(self) -> dict[str, Any]:
        """What this block sets explicitly (a step's runner override is merged over the top-level one)."""
        return {name: getattr(self, name) for name in self.model_fields_set if name in type(self).model_fields}


class StepConfig(Model):
    """One step of `execution.steps`: a fresh `claude -p` in the case's sandbox and workspace.

    Everything a step does not set falls back to `execution` (timeout,
    max_budget_usd; env is merged under the step's) and the top-level `runner`
    (its `runner:` block overrides only the keys it sets, see
    `RunnerConfig.set_fields`). `on_failure: fail` stops the remaining steps.
    """

    id: str
    skill: str = ""
    prompt: str = ""
    arguments: str = ""
    env: EnvMap = Field(default_factory=dict)
    timeout: int | None = Field(default=None, ge=0)
    max_budget_usd: float | None = Field(default=None, ge=0)
    runner: RunnerConfig | None = None
    on_failure: Literal["fail", "continue"] = "fail"

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not STEP_ID.match(value):
            raise RuleError(f"must be 1-64 letters, digits, '_' or '-' (not starting with '-'), got {value!r}",
                            fix="step ids name {{ steps.<id> }}, a judge's step: and a directory of the record")
        return value

    @field_validator("skill")
    @classmethod
    def _skill(cls, value: str) -> str:
        return _check_skill(value)

    @field_validator("arguments", "prompt")
    @classmethod
    def _template(cls, value: str) -> str:
        return _check_template(value)

    @model_validator(mode="after")
    def _one_target(self) -> StepConfig:
        if self.skill and self.prompt:
            raise RuleError("sets both skill and prompt; a step runs one of them", field="skill",
                            fix="keep skill (with arguments) or prompt")
        if not self.skill and not self.prompt:
            raise RuleError("sets neither skill nor prompt; a step runs exactly one of them", field="skill")
        if self.runner is not None and self.runner.workspace_mode is not None:
            raise RuleError("is a setting of the whole run, not of one step", field="runner.workspace_mode",
                            fix="set runner.workspace_mode at the top level")
        return self

    @property
    def template(self) -> str:
        """What is rendered for the step: its arguments (skill) or its prompt."""
        return self.arguments if self.skill else self.prompt


def step_references(template: str) -> list[str]:
    """The step ids a template refers to as `steps.<id>` or `steps['<id>']`."""
    return [dotted or quoted for dotted, quoted in _STEP_REFERENCE.findall(template)]


class ExecutionConfig(Model):
    mode: str = "case"
    skill: str = ""
    prompt: str = ""
    arguments: str = ""
    timeout: int | None = Field(default=None, ge=0)
    max_budget_usd: float | None = Field(default=None, ge=0)
    parallelism: int | None = Field(default=None, ge=0)
    env: EnvMap = Field(default_factory=dict)
    steps: list[StepConfig] = Field(default_factory=list)

    @field_validator("env", mode="before")
    @classmethod
    def _none_env(cls, value: Any) -> Any:
        return _none_is_empty_map(value)

    @field_validator("steps", mode="before")
    @classmethod
    def _none_steps(cls, value: Any) -> Any:
        return _none_is_empty_list(value)

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in EXECUTION_MODES:
            raise RuleError(f"must be one of {list(EXECUTION_MODES)}")
        return value

    @field_validator("skill")
    @classmethod
    def _skill(cls, value: str) -> str:
        return _check_skill(value)

    @field_validator("arguments", "prompt")
    @classmethod
    def _template(cls, value: str) -> str:
        return _check_template(value)

    @model_validator(mode="after")
    def _skill_xor_prompt(self) -> ExecutionConfig:
        if self.skill and self.prompt:
            raise RuleError("and execution.prompt are mutually exclusive", field="skill")
        if self.steps:
            self._check_steps()
        return self

    def _check_steps(self) -> None:
        if self.mode == "batch":
            raise RuleError("are case-mode only: a batch run is one invocation for all cases", field="steps",
                            fix="use execution.mode: case, or drop the steps")
        if self.skill or self.prompt:
            raise RuleError("replaces execution.skill/prompt; the two cannot be combined", field="steps",
                            fix="move the skill or prompt into a step")
        seen: set[str] = set()
        for index, step in enumerate(self.steps):
            if step.id in seen:
                raise RuleError("is the id of an earlier step too; step ids must be unique",
                                field=f"steps[{index}].id")
            for key in ("arguments", "prompt"):
                for ref in step_references(getattr(step, key)):
                    if ref not in seen:
                        later = "a later step or itself" if ref in {s.id for s in self.steps} else "no step"
                        raise RuleError(f"refers to steps.{ref}, which is {later}; a step can use only "
                                        "the steps before it", field=f"steps[{index}].{key}")
            seen.add(step.id)

    @property
    def step_ids(self) -> list[str]:
        return [step.id for step in self.steps]


class ModelsConfig(Model):
    skill: str | None = None
    subagent: str | None = None
    judge: str | None = None
    hook: str | None = None


class PathRule(Model):
    path: str
    tools: StrList = Field(default_factory=list)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.strip():
            raise RuleError("must be a non-empty path")
        return value


PermissionEntry = str | PathRule


class PermissionsConfig(Model):
    allow: list[PermissionEntry] = Field(default_factory=list)
    deny: list[PermissionEntry] = Field(default_factory=list)

    @field_validator("allow", "deny", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return _none_is_empty_list(value)

    @property
    def has_path_rules(self) -> bool:
        return any(isinstance(e, PathRule) for e in (*self.allow, *self.deny))


# --- dataset, inputs, outputs -------------------------------------------------------------


class DatasetWorkspace(Model):
    files: StrList = Field(default_factory=list)

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[str]) -> list[str]:
        # Relative to each case directory: nothing outside it, and not the whole case (its answer key).
        _check_paths(value, no_parent=True, reject_root=True)
        return [paths.normal_relative(entry.rstrip("/")) for entry in value]


class DatasetConfig(Model):
    path: str = ""
    schema_: str = Field(default="", alias="schema")
    workspace: DatasetWorkspace = Field(default_factory=DatasetWorkspace)

    @field_validator("workspace", mode="before")
    @classmethod
    def _none_workspace(cls, value: Any) -> Any:
        return _none_is_empty_map(value)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        # Absolute is allowed (a dataset shared by several evals); `..` is not.
        return _check_path(value, allow_absolute=True, no_parent=True) if value else value


class ToolInputConfig(Model):
    match: str
    prompt: str = ""
    prompt_file: str = ""

    @field_validator("prompt_file")
    @classmethod
    def _prompt_file(cls, value: str) -> str:
        return _check_path(value) if value else value


class InputsConfig(Model):
    tools: list[ToolInputConfig] = Field(default_factory=list)

    @field_validator("tools", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        # `tools:` with every entry commented out parses as None.
        return _none_is_empty_list(value)


_CASE_RECORD_NAMES = frozenset(name.casefold() for name in CASE_RECORD_NAMES)


class OutputConfig(Model):
    path: str | None = None
    tool: str | None = None
    schema_: str = Field(default="", alias="schema")
    batch_pattern: str = ""
    types: dict[str, str] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is None:
            return value
        stripped = value.strip().rstrip("/")
        problem = paths.relative_problem(stripped or ".", no_parent=True, reject_root=True)
        if problem:
            raise RuleError(f"{problem} (got {value!r})", fix="name a subdirectory of the case workspace")
        normal = paths.normal_relative(stripped)
        first = normal.split("/")[0]
        if first.casefold() in _CASE_RECORD_NAMES:
            raise RuleError(
                f"starts with {first!r}, a name the tool gives its own record of each case; the collected "
                f"output would replace it (got {value!r})",
                fix="have the skill write into a subdirectory with another name, e.g. artifacts/",
            )
        return normal

    @model_validator(mode="after")
    def _path_xor_tool(self) -> OutputConfig:
        if bool(self.path) == bool(self.tool):
            raise RuleError("sets both or neither; each outputs[] entry sets exactly one of 'path' or 'tool'",
                            field="path")
        return self

    @property
    def name(self) -> str:
        """The last component of `path`: the name judges and `agent.inputs` know it by."""
        return (self.path or "").rsplit("/", 1)[-1]


class TracesConfig(Model):
    stdout: bool = True
    stderr: bool = True
    events: bool = True
    metrics: bool = True


# --- hooks --------------------------------------------------------------------------------


class HookEntry(Model):
    command: str = ""
    timeout: PositiveInt = 120
    description: str = ""
    on_failure: Literal["fail", "continue"] = "fail"
    condition: str = ""
    scope: Literal["host", "container"] = "host"

    @property
    def label(self) -> str:
        if self.description:
            return self.description
        first = self.command.strip().splitlines()[0] if self.command.strip() else ""
        return first[:60]


class HooksConfig(Model):
    before_all: list[HookEntry] = Field(default_factory=list)
    before_each: list[HookEntry] = Field(default_factory=list)
    before_step: list[HookEntry] = Field(default_factory=list)
    after_step: list[HookEntry] = Field(default_factory=list)
    after_each: list[HookEntry] = Field(default_factory=list)
    before_scoring: list[HookEntry] = Field(default_factory=list)
    after_all: list[HookEntry] = Field(default_factory=list)
    before_report: list[HookEntry] = Field(default_factory=list)

    @field_validator(*HOOK_PHASES, mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return _none_is_empty_list(value)

    @model_validator(mode="after")
    def _container_scope_only_per_case(self) -> HooksConfig:
        for phase in RUN_PHASES:
            for index, hook in enumerate(getattr(self, phase)):
                if hook.scope == "container":
                    raise RuleError(
                        "'container' is only allowed in before_each, after_each, before_step and after_step "
                        "(there is no case sandbox in this phase)",
                        field=f"{phase}[{index}].scope",
                    )
        return self

    def phase(self, name: str) -> list[HookEntry]:
        return list(getattr(self, name))


# --- judges -------------------------------------------------------------------------------

JudgeKind = Literal["builtin", "check", "agent", "llm", "code", "skip"]


class AgentJudgeConfig(Model):
    """The `agent:` block that makes an LLM judge a tool-using agent in its own sandbox.

    Every key is optional. `inputs` None stages every collected output
    directory; `[.]` stages everything. `timeout` None falls back to
    `execution.timeout`, else DEFAULT_AGENT_JUDGE_TIMEOUT_S.
    """

    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    allowed_tools: StrList = Field(default_factory=lambda: list(DEFAULT_AGENT_JUDGE_TOOLS))
    context: StrList = Field(default_factory=list)
    inputs: list[str] | None = None
    timeout: PositiveInt | None = None
    max_budget_usd: float = Field(default=DEFAULT_AGENT_JUDGE_BUDGET_USD, ge=0)

    @field_validator("runner", mode="before")
    @classmethod
    def _none_runner(cls, value: Any) -> Any:
        return _none_is_empty_map(value)

    @field_validator("context")
    @classmethod
    def _context(cls, value: list[str]) -> list[str]:
        return _check_paths(value, allow_absolute=True)

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            _check_paths([v.rstrip("/") or v for v in value], no_parent=True)
        return value

    @model_validator(mode="after")
    def _isolated(self) -> AgentJudgeConfig:
        if self.runner.workspace_mode == "repo":
            raise RuleError("is refused for agent judges: they run in their own staged workspace, never in "
                            "the repository", field="runner.workspace_mode", fix="remove it")
        return self


class JudgeConfig(Model):
    name: str
    description: str = ""
    builtin: str | None = None
    check: str | None = None
    agent: AgentJudgeConfig | None = None
    llm_rubric: str | None = None
    prompt: str | None = None
    prompt_file: str | None = None
    context: StrList = Field(default_factory=list)
    module: str | None = None
    function: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    if_: str | None = Field(default=None, alias="if")
    feedback_type: str | None = None
    model: str | None = None
    samples: PositiveInt = 1
    score_range: ScoreRange = None
    step: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value.strip():
            raise RuleError("must not be empty", fix="give every judge a name (thresholds and reports use it)")
        return value

    @field_validator("builtin", mode="before")
    @classmethod
    def _builtin_is_str(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise RuleError("must be a string naming a builtin judge")
        return value

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_mapping(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise RuleError("must be a mapping")
        return value

    @field_validator("prompt_file")
    @classmethod
    def _prompt_file(cls, value: str | None) -> str | None:
        return _check_path(value, allow_absolute=True) if value is not None else value

    @field_validator("context")
    @classmethod
    def _context(cls, value: list[str]) -> list[str]:
        return _check_paths(value, allow_absolute=True)

    @field_validator("module")
    @classmethod
    def _module(cls, value: str | None) -> str | None:
        problem = paths.module_name_problem(value) if value is not None else None
        if problem:
            raise RuleError(f"{problem} (got {value!r})")
        return value

    @model_validator(mode="after")
    def _exclusivity_and_scale(self) -> JudgeConfig:
        if self.builtin is not None:
            clashes = [
                key
                for key in ("check", "prompt", "prompt_file", "agent", "module", "function", "llm_rubric")
                if getattr(self, key) is not None
            ]
            if clashes:
                raise RuleError(f"is mutually exclusive with {', '.join(clashes)}", field="builtin",
                                fix="keep builtin, or remove it to use the other judge type")
        if self.feedback_type == "bool" and self.score_range is not None:
            raise RuleError("sets feedback_type: bool together with score_range; a pass/fail verdict has no scale",
                            fix="drop feedback_type: bool or score_range")
        if (
            self.feedback_type == "int"
            and self.score_range is not None
            and not all(float(v).is_integer() for v in self.score_range)
        ):
            raise RuleError("sets feedback_type: int with fractional score_range bounds",
                            fix="use feedback_type: float")
        if self.agent is not None and self.builtin is None and self.check is None and not self.has_instructions:
            raise RuleError("has no instructions: an agent judge takes them from prompt, prompt_file or "
                            "llm_rubric", field="agent", fix="add one of them")
        return self

    @property
    def has_instructions(self) -> bool:
        return self.llm_rubric is not None or self.prompt is not None or self.prompt_file is not None

    @property
    def kind(self) -> JudgeKind:
        """The judge type, inferred in the reference's fixed precedence."""
        if self.builtin is not None:
            return "builtin"
        if self.check is not None:
            return "check"
        if self.agent is not None:
            return "agent"
        if self.has_instructions:
            return "llm"
        if self.module is not None and self.function is not None:
            return "code"
        return "skip"

    @property
    def is_bool(self) -> bool:
        return self.feedback_type == "bool"


class ThresholdConfig(Model):
    min_mean: float | None = None
    min_pass_rate: float | None = None
    min_win_rate: float | None = None
    max_error_rate: float | None = None


def thresholds_that_gate(value: Any) -> Any:
    """The thresholds entries that are mappings. The reference stores the block as is, so an entry
    such as `overall: 0.6` loads and gates nothing; the loader warns about it."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {key: checks for key, checks in value.items() if isinstance(checks, dict)}
    return value


# --- reward, generation -------------------------------------------------------------------


class RewardConfig(Model):
    """`reward:` — one RL scalar per case, in one of two modes that cannot be mixed.

    Single-judge (`judge`): that judge's value, clamped (or mapped from its own
    score_range with `normalize`). Formula: `weighted` (the weighted mean of
    `weights`) or a restricted Python expression over judge names. `gate`
    (default: on in formula mode, off in judge mode) zeros the reward when any
    boolean judge returned false.
    """

    judge: str | None = None
    normalize: bool = False
    formula: str | None = None
    weights: dict[str, float] = Field(default_factory=dict)
    score_range: ScoreRange = None
    raw: StrList = Field(default_factory=list)
    gate: bool | None = None

    @field_validator("weights", mode="before")
    @classmethod
    def _weights(cls, value: Any) -> Any:
        value = _none_is_empty_map(value)
        if isinstance(value, dict):
            for name, weight in value.items():
                if (isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight)
                        or weight < 0):
                    raise RuleError(f"must be a non-negative number (got {weight!r})", field=str(name))
        return value

    @field_validator("formula")
    @classmethod
    def _formula(cls, value: str | None) -> str | None:
        if value is not None and value.strip() != "weighted":
            problem = formula_problem(value)
            if problem:
                raise RuleError(problem, fix="see docs/validation.md for what a reward formula may use")
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> RewardConfig:
        if self.judge is not None:
            if not self.judge.strip():
                raise RuleError("must name a judge", field="judge")
            mixed = [key for key in ("formula", "weights", "raw") if key in self.model_fields_set]
            if mixed:
                raise RuleError(f"cannot be combined with {', '.join(mixed)}: a reward is one judge's value "
                                "or a formula", field="judge", fix=f"remove {' and '.join(mixed)} or judge")
        return self

    @property
    def mode(self) -> Literal["judge", "weighted", "expression"]:
        if self.judge is not None:
            return "judge"
        return "weighted" if (self.formula or "weighted").strip() == "weighted" else "expression"

    @property
    def gates(self) -> bool:
        return self.gate if self.gate is not None else self.mode != "judge"

    def judge_names(self) -> list[tuple[str, str]]:
        """(field, judge name) for every judge the block names."""
        named: list[tuple[str, str]] = []
        if self.judge is not None:
            named.append(("judge", self.judge))
        if self.mode == "expression" and self.formula is not None:
            named += [("formula", name) for name in formula_names(self.formula)]
        named += [(f"weights.{name}", name) for name in self.weights]
        named += [(f"raw[{index}]", name) for index, name in enumerate(self.raw)]
        return named


class SeedConfig(Model):
    category: str
    count: int
    builtin: str | None = None
    prompt_file: str | None = None
    prompt: str | None = None
    description: str = ""

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if not value.strip():
            raise RuleError("must not be empty")
        return value

    @field_validator("count", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RuleError(f"must be a whole number of at least 1 (got {value!r})")
        return value

    @field_validator("prompt_file")
    @classmethod
    def _prompt_file(cls, value: str | None) -> str | None:
        return _check_path(value) if value is not None else value

    @model_validator(mode="after")
    def _one_prompt(self) -> SeedConfig:
        chosen = [key for key in ("builtin", "prompt_file", "prompt") if getattr(self, key) is not None]
        if len(chosen) != 1:
            got = ", ".join(chosen) if chosen else "none"
            raise RuleError(f"must set exactly one of builtin, prompt_file, prompt (sets {got})", field=None)
        return self


class GenerationConfig(Model):
    strategy: str = "skill"
    context: str | dict[str, Any] | None = None
    seeds: list[SeedConfig] = Field(default_factory=list)

    @field_validator("seeds", mode="before")
    @classmethod
    def _none_seeds(cls, value: Any) -> Any:
        return _none_is_empty_list(value)

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        if value not in GENERATION_STRATEGIES:
            raise RuleError(f"must be one of {list(GENERATION_STRATEGIES)}")
        return value

    @model_validator(mode="after")
    def _seeds_for_synthetic(self) -> GenerationConfig:
        if self.strategy == "synthetic" and not self.seeds:
            raise RuleError("is required (at least one seed) with strategy: synthetic", field="seeds")
        if self.strategy != "synthetic" and self.seeds:
            raise RuleError(f"are only used by strategy: synthetic (strategy is {self.strategy})", field="seeds",
                            fix="set strategy: synthetic or remove the seeds")
        return self


# --- sandbox ------------------------------------------------------------------------------


class FilesystemPolicy(Model):
    deny_read: StrList = Field(default_factory=list, alias="denyRead")

    @field_validator("deny_read")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for index, entry in enumerate(value):
            if paths.has_parent_segment(entry):
                raise RuleError(f"must not contain '..' (got {entry!r})", field=f"[{index}]")
        return value


# The kinds of server-side tools an eval may let through the gateway (gateway/policy.py).
SERVER_TOOL_KINDS = ("web_search", "web_fetch", "code_execution", "mcp")
GATEWAY_KEYS = ("models", "server_tools", "max_tokens")


class GatewayConfig(BaseModel):
    """`sandbox.gateway`: what the model gateway lets a case ask of the model API.

    Strict, unlike the reference's blocks: a mistyped key here would silently
    leave a server tool off or a model refused, so it is an error at load.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    models: list[str] = Field(default_factory=list)  # allowed beside models.skill/subagent and the CLI's Haiku
    server_tools: list[str] = Field(default_factory=list)
    max_tokens: int = Field(default=128_000, ge=2048, le=1_000_000)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:
        if isinstance(value, dict):
            unknown = [str(key) for key in value if key not in GATEWAY_KEYS]
            if unknown:
                raise RuleError(f"is not a gateway setting; the keys are {', '.join(GATEWAY_KEYS)}",
                                field=unknown[0])
        return value

    @field_validator("models", "server_tools", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return _none_is_empty_list(value)

    @field_validator("models")
    @classmethod
    def _models(cls, value: list[str]) -> list[str]:
        if any(not isinstance(m, str) or not m.strip() for m in value):
            raise RuleError("entries must be non-empty model names, e.g. claude-opus-4-6")
        return [m.strip() for m in value]

    @field_validator("server_tools")
    @classmethod
    def _server_tools(cls, value: list[str]) -> list[str]:
        for kind in value:
            if kind not in SERVER_TOOL_KINDS:
                raise RuleError(f"{kind!r} is not a server tool kind; use some of {list(SERVER_TOOL_KINDS)}")
        return value


class SandboxConfig(Model):
    """This project's own block: how each case's container is built and confined."""

    backend: str = "docker"
    image: str | None = None
    base_image: str | None = None
    claude_version: str | None = None
    runtime: str | None = None
    network: Literal["none"] = defaults.NETWORK
    cpus: float = Field(default=defaults.CPUS, gt=0)
    memory: str = defaults.MEMORY
    pids: int = Field(default=defaults.PIDS, ge=defaults.MIN_PIDS)
    disk: str = defaults.DISK
    tmp_size: str = defaults.TMP_SIZE
    home_size: str = defaults.HOME_SIZE
    user: str = defaults.USER
    read_only_root: bool = defaults.READ_ONLY_ROOT
    no_new_privileges: bool = defaults.NO_NEW_PRIVILEGES
    cap_drop: list[str] = Field(default_factory=lambda: list(defaults.CAP_DROP))
    cap_add: list[str] = Field(default_factory=lambda: list(defaults.CAP_ADD))
    init: bool = defaults.INIT
    filesystem: FilesystemPolicy = Field(default_factory=FilesystemPolicy)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    # backend: kubernetes only (config/kubernetes_settings.py)
    namespace: str | None = None
    runtime_class: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[k8s.Toleration] = Field(default_factory=list)
    image_pull_secrets: list[str] = Field(default_factory=list)
    controller: k8s.ControllerAddress = Field(default_factory=k8s.ControllerAddress)

    @field_validator("gateway", "filesystem", "controller", mode="before")
    @classmethod
    def _none_block_is_default(cls, value: Any) -> Any:
        return _none_is_empty_map(value)

    @field_validator("node_selector", "tolerations", "image_pull_secrets", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any, info: Any) -> Any:
        if value is None:
            return {} if info.field_name == "node_selector" else []
        return value

    _namespace = field_validator("namespace")(k8s.check_namespace)
    _runtime_class = field_validator("runtime_class")(k8s.check_runtime_class)
    _node_selector = field_validator("node_selector")(k8s.check_node_selector)
    _pull_secrets = field_validator("image_pull_secrets")(k8s.check_pull_secrets)

    @model_validator(mode="after")
    def _backend_settings(self) -> SandboxConfig:
        if self.backend != "kubernetes":
            given = [key for key in k8s.KUBERNETES_KEYS if key in self.model_fields_set]
            if given:
                raise ValueError(f"sandbox.{given[0]} is a Kubernetes setting, but sandbox.backend is "
                                 f"{self.backend!r}; set sandbox.backend: kubernetes or remove it")
            return self
        if self.runtime is not None:
            raise ValueError("sandbox.runtime names a Docker runtime; on Kubernetes use sandbox.runtime_class "
                             "(e.g. gvisor) instead")
        if int(self.user.partition(":")[0]) == 0:
            # The case Pod says runAsNonRoot (kubernetes_objects.py): the kubelet would refuse to start it.
            raise ValueError(f"sandbox.user {self.user!r} runs the agent as root, which the Kubernetes backend's "
                             "Pods never do (runAsNonRoot); set a non-zero uid such as \"1000:1000\", or use "
                             "sandbox.backend: docker")
        if not self.image:
            raise ValueError("sandbox.image is required with sandbox.backend: kubernetes (the cluster pulls it: "
                             "`agent-eval-sandbox image build`, then docker tag/push it to a registry the cluster "
                             "reads)")
        return self

    @field_validator("memory", "disk", "tmp_size", "home_size", mode="before")
    @classmethod
    def _size(cls, value: Any) -> Any:
        parse_size(value)  # raises ValueError with the accepted forms
        return str(value)

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value: Any) -> Any:
        if value != "none":
            raise RuleError(
                "must be 'none' (model traffic goes through the host gateway; nothing else leaves the sandbox)"
            )
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not re.fullmatch(r"\d+(:\d+)?", str(value)):
            raise RuleError("must be a numeric uid or uid:gid, e.g. 1000:1000")
        return str(value)


# --- the whole file -----------------------------------------------------------------------


class MlflowConfig(Model):
    """`mlflow:` — its presence turns tracking on (report/mlflow_log.py)."""

    experiment: str = ""  # empty: the eval's name
    tracking_uri: str | None = None  # unset: $MLFLOW_TRACKING_URI, else http://127.0.0.1:5000
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_as_text(cls, value: Any) -> Any:
        # YAML makes `suite: 1` a number; MLflow tags are text.
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else _none_is_empty_map(value)


class EvalConfig(Model):
    name: str = ""
    description: str = ""
    title: str = "Agent Eval Report"
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    generation: GenerationConfig | None = None
    inputs: InputsConfig = Field(default_factory=InputsConfig)
    outputs: list[OutputConfig] = Field(default_factory=list)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    judges: list[JudgeConfig] = Field(default_factory=list)
    thresholds: Annotated[dict[str, ThresholdConfig], BeforeValidator(thresholds_that_gate)] = Field(
        default_factory=dict)
    reward: RewardConfig | None = None
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    mlflow: MlflowConfig | None = None  # present (even empty): runs are logged to MLflow

    @field_validator(
        "execution", "runner", "models", "permissions", "dataset", "inputs", "traces", "hooks", "sandbox",
        mode="before",
    )
    @classmethod
    def _none_block_is_default(cls, value: Any) -> Any:
        # A block with every line commented out parses as None: treat it as absent.
        return _none_is_empty_map(value)

    @field_validator("outputs", "judges", mode="before")
    @classmethod
    def _none_list_is_empty(cls, value: Any) -> Any:
        return _none_is_empty_list(value)

    @model_validator(mode="after")
    def _across_blocks(self) -> EvalConfig:
        self._unique_judge_names()
        self._judge_steps()
        self._reward_names()
        self._interception_runner()
        return self

    def _unique_judge_names(self) -> None:
        seen: set[str] = set()
        for index, judge in enumerate(self.judges):
            if judge.name in seen and judge.name != PAIRWISE:
                raise RuleError(f"is the name of an earlier judge too; judge names must be unique (only "
                                f"'{PAIRWISE}' may repeat)", field=f"judges[{index}].name")
            seen.add(judge.name)

    def _judge_steps(self) -> None:
        ids = self.execution.step_ids
        for index, judge in enumerate(self.judges):
            if judge.step is None:
                continue
            if not ids:
                raise RuleError("scopes the judge to a step, but execution.steps is not set",
                                field=f"judges[{index}].step", fix="remove step: or define execution.steps")
            if judge.step not in ids:
                raise RuleError(f"{judge.step!r} is no step id; the steps are {ids}", field=f"judges[{index}].step")

    def _reward_names(self) -> None:
        if self.reward is None:
            return
        judges = [j.name for j in self.scored_judges]
        for field, name in self.reward.judge_names():
            if name not in judges:
                raise RuleError(f"names {name!r}, which is no judge; the judges are {judges}",
                                field=f"reward.{field}", fix="use a name from judges:")

    def _interception_runner(self) -> None:
        if self.inputs.tools and self.runner.type == "codex":
            raise RuleError("cannot be used with runner.type codex (it has no tool interception)",
                            field="inputs.tools", fix="use runner.type: claude-code or remove inputs.tools")

    @property
    def is_batch(self) -> bool:
        return self.execution.mode == "batch"

    @property
    def is_repo_mode(self) -> bool:
        return self.runner.workspace_mode == "repo"

    @property
    def scored_judges(self) -> list[JudgeConfig]:
        return [j for j in self.judges if j.name != PAIRWISE]
