"""Typed models of `eval.yaml` (agent-eval-harness format) plus our `sandbox:` block.

Field names, defaults and load-time rules follow the agent-eval-harness
reference (shared/reference/agent-eval-harness). Keys this project does not
implement are kept on the model (`extra="allow"`) and reported by the loader
as warnings; the loader also maps pydantic errors to one-line `ConfigError`s.
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
from agent_eval_sandbox.sandbox import defaults
from agent_eval_sandbox.sandbox.defaults import parse_size

EXECUTION_MODES = ("case", "batch")
CLAUDE_EFFORTS = ("low", "medium", "high", "xhigh", "max")
PERMISSION_MODES = ("default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions")
RUNNER_TYPES = ("claude-code", "codex", "cli", "responses-api")
IMPLEMENTED_RUNNER_TYPES = ("claude-code",)
HOOK_PHASES = ("before_all", "before_each", "after_each", "before_scoring", "after_all", "before_report")
PER_CASE_PHASES = ("before_each", "after_each")
THRESHOLD_KEYS = ("min_mean", "min_pass_rate", "min_win_rate", "max_error_rate")
DEFAULT_HOOK_MODEL = "claude-haiku-4-5-20251001"

# Runtime defaults the reference applies only at run time (the config keeps None).
DEFAULT_TIMEOUT_S = 3600
DEFAULT_MAX_BUDGET_USD = 100.0
DEFAULT_PARALLELISM = 1


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


def _has_parent_segment(path: str) -> bool:
    return ".." in re.split(r"[\\/]+", path)


def _coerce_env(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _scalar_to_str(v) for k, v in value.items()}
    return value


EnvMap = Annotated[dict[str, str], BeforeValidator(_coerce_env)]


class ExecutionConfig(Model):
    mode: str = "case"
    skill: str = ""
    prompt: str = ""
    arguments: str = ""
    timeout: int | None = Field(default=None, ge=0)
    max_budget_usd: float | None = Field(default=None, ge=0)
    parallelism: int | None = Field(default=None, ge=0)
    env: EnvMap = Field(default_factory=dict)

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in EXECUTION_MODES:
            raise ValueError(f"execution.mode must be one of {list(EXECUTION_MODES)}")
        return value

    @model_validator(mode="after")
    def _skill_xor_prompt(self) -> ExecutionConfig:
        if self.skill and self.prompt:
            raise ValueError("execution.skill and execution.prompt are mutually exclusive")
        return self


class RunnerConfig(Model):
    type: str = "claude-code"
    effort: str | None = None
    permission_mode: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    plugin_dirs: list[str] = Field(default_factory=list)
    env: EnvMap = Field(default_factory=dict)
    system_prompt: str = ""
    command: str | list[str] | None = None
    workspace_mode: Literal["repo"] | None = None

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        if value not in RUNNER_TYPES:
            raise ValueError(f"runner.type must be one of {list(RUNNER_TYPES)}")
        return value

    @field_validator("workspace_mode", mode="before")
    @classmethod
    def _workspace_mode(cls, value: Any) -> Any:
        if value is not None and value != "repo":
            raise ValueError("runner.workspace_mode must be unset or 'repo'")
        return value

    @model_validator(mode="after")
    def _claude_code_enums(self) -> RunnerConfig:
        # The reference validates these only for the runtimes that read them.
        if self.type == "claude-code":
            if self.effort is not None and self.effort not in CLAUDE_EFFORTS:
                raise ValueError(f"runner.effort must be one of {list(CLAUDE_EFFORTS)}")
            if self.permission_mode is not None and self.permission_mode not in PERMISSION_MODES:
                raise ValueError(f"runner.permission_mode must be one of {list(PERMISSION_MODES)}")
        return self


class ModelsConfig(Model):
    skill: str | None = None
    subagent: str | None = None
    judge: str | None = None
    hook: str | None = None


class PathRule(Model):
    path: str
    tools: list[str] = Field(default_factory=list)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a path rule needs a non-empty path")
        return value


PermissionEntry = str | PathRule


class PermissionsConfig(Model):
    allow: list[PermissionEntry] = Field(default_factory=list)
    deny: list[PermissionEntry] = Field(default_factory=list)

    @property
    def has_path_rules(self) -> bool:
        return any(isinstance(e, PathRule) for e in (*self.allow, *self.deny))


class DatasetWorkspace(Model):
    files: list[str] = Field(default_factory=list)

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[str]) -> list[str]:
        for entry in value:
            if _has_parent_segment(entry):
                raise ValueError(f"dataset.workspace.files entry {entry!r} must not contain '..'")
        return [entry.rstrip("/") for entry in value]


class DatasetConfig(Model):
    path: str = ""
    schema_: str = Field(default="", alias="schema")
    workspace: DatasetWorkspace = Field(default_factory=DatasetWorkspace)

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if _has_parent_segment(value):
            raise ValueError("dataset.path must not contain '..'")
        return value


class ToolInputConfig(Model):
    match: str
    prompt: str = ""
    prompt_file: str = ""


class InputsConfig(Model):
    tools: list[ToolInputConfig] = Field(default_factory=list)

    @field_validator("tools", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        # `tools:` with every entry commented out parses as None.
        return [] if value is None else value


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
        if stripped.startswith("/"):
            raise ValueError(f"outputs[].path {value!r} must be relative to the case workspace")
        if _has_parent_segment(stripped):
            raise ValueError(f"outputs[].path {value!r} must not contain '..'")
        if stripped in ("", "."):
            raise ValueError(f"outputs[].path {value!r} must name a subdirectory, not the workspace root")
        return stripped

    @model_validator(mode="after")
    def _path_xor_tool(self) -> OutputConfig:
        if bool(self.path) == bool(self.tool):
            raise ValueError("each outputs[] entry sets exactly one of 'path' or 'tool'")
        return self


class TracesConfig(Model):
    stdout: bool = True
    stderr: bool = True
    events: bool = True
    metrics: bool = True


class HookEntry(Model):
    command: str = ""
    timeout: int = Field(default=120, gt=0)
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
    after_each: list[HookEntry] = Field(default_factory=list)
    before_scoring: list[HookEntry] = Field(default_factory=list)
    after_all: list[HookEntry] = Field(default_factory=list)
    before_report: list[HookEntry] = Field(default_factory=list)

    @field_validator(*HOOK_PHASES, mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    @model_validator(mode="after")
    def _container_scope_only_per_case(self) -> HooksConfig:
        for phase in HOOK_PHASES:
            if phase in PER_CASE_PHASES:
                continue
            for index, hook in enumerate(getattr(self, phase)):
                if hook.scope == "container":
                    raise ValueError(
                        f"hooks.{phase}[{index}].scope: 'container' is only allowed in "
                        "before_each and after_each (there is no case sandbox in this phase)"
                    )
        return self

    def phase(self, name: str) -> list[HookEntry]:
        return list(getattr(self, name))


JudgeKind = Literal["builtin", "check", "agent", "llm", "code", "skip"]


class JudgeConfig(Model):
    name: str
    description: str = ""
    builtin: str | None = None
    check: str | None = None
    agent: dict[str, Any] | None = None
    llm_rubric: str | None = None
    prompt: str | None = None
    prompt_file: str | None = None
    context: list[str] = Field(default_factory=list)
    module: str | None = None
    function: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    if_: str | None = Field(default=None, alias="if")
    feedback_type: str | None = None
    model: str | None = None
    samples: int = Field(default=1, ge=1)
    score_range: tuple[float, float] | None = None

    @field_validator("builtin")
    @classmethod
    def _builtin_is_str(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError("builtin must be a string naming a builtin judge")
        return value

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_mapping(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("arguments must be a mapping")
        return value

    @field_validator("score_range", mode="before")
    @classmethod
    def _score_range(cls, value: Any) -> Any:
        if value is None:
            return None
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            or not all(math.isfinite(v) for v in value)
            or not value[0] < value[1]
        ):
            raise ValueError("score_range must be a two-element increasing numeric list [min, max]")
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
                raise ValueError(
                    f"judges.{self.name}: builtin is mutually exclusive with {', '.join(clashes)}"
                )
        if self.feedback_type == "bool" and self.score_range is not None:
            raise ValueError(
                f"judges.{self.name}: feedback_type: bool cannot be combined with score_range "
                "(a pass/fail verdict has no scale); drop one of them"
            )
        if (
            self.feedback_type == "int"
            and self.score_range is not None
            and not all(float(v).is_integer() for v in self.score_range)
        ):
            raise ValueError(
                f"judges.{self.name}: feedback_type: int declares fractional score_range bounds; "
                "use feedback_type: float"
            )
        return self

    @property
    def kind(self) -> JudgeKind:
        """The judge type, inferred in the reference's fixed precedence."""
        if self.builtin is not None:
            return "builtin"
        if self.check is not None:
            return "check"
        if self.agent is not None:
            return "agent"
        if self.llm_rubric is not None or self.prompt is not None or self.prompt_file is not None:
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


class FilesystemPolicy(Model):
    deny_read: list[str] = Field(default_factory=list, alias="denyRead")

    @field_validator("deny_read")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for entry in value:
            if _has_parent_segment(entry):
                raise ValueError(f"sandbox.filesystem.denyRead entry {entry!r} must not contain '..'")
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
                raise ValueError(f"sandbox.gateway.{unknown[0]} is not a gateway setting; "
                                 f"the keys are {', '.join(GATEWAY_KEYS)}")
        return value

    @field_validator("models", "server_tools", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("models")
    @classmethod
    def _models(cls, value: list[str]) -> list[str]:
        if any(not isinstance(m, str) or not m.strip() for m in value):
            raise ValueError("sandbox.gateway.models entries must be non-empty model names, e.g. claude-opus-4-6")
        return [m.strip() for m in value]

    @field_validator("server_tools")
    @classmethod
    def _server_tools(cls, value: list[str]) -> list[str]:
        for kind in value:
            if kind not in SERVER_TOOL_KINDS:
                raise ValueError(f"sandbox.gateway.server_tools: {kind!r} is not a server tool kind; "
                                 f"use some of {list(SERVER_TOOL_KINDS)}")
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

    @field_validator("gateway", "controller", mode="before")
    @classmethod
    def _none_block_is_default(cls, value: Any) -> Any:
        return {} if value is None else value

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
            raise ValueError(
                "sandbox.network must be 'none' (model traffic goes through the host gateway; "
                "nothing else leaves the sandbox)"
            )
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not re.fullmatch(r"\d+(:\d+)?", str(value)):
            raise ValueError("sandbox.user must be a numeric uid or uid:gid, e.g. 1000:1000")
        return str(value)


class EvalConfig(Model):
    name: str = ""
    description: str = ""
    title: str = "Agent Eval Report"
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    inputs: InputsConfig = Field(default_factory=InputsConfig)
    outputs: list[OutputConfig] = Field(default_factory=list)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    judges: list[JudgeConfig] = Field(default_factory=list)
    thresholds: dict[str, ThresholdConfig] = Field(default_factory=dict)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    @field_validator(
        "execution", "runner", "models", "permissions", "dataset", "inputs", "traces", "hooks", "sandbox",
        mode="before",
    )
    @classmethod
    def _none_block_is_default(cls, value: Any) -> Any:
        # A block with every line commented out parses as None: treat it as absent.
        return {} if value is None else value

    @field_validator("outputs", "judges", mode="before")
    @classmethod
    def _none_list_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("thresholds", mode="before")
    @classmethod
    def _none_map_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _unique_judge_names(self) -> EvalConfig:
        seen: set[str] = set()
        for judge in self.judges:
            if judge.name in seen and judge.name != "pairwise":
                raise ValueError(f"judge name {judge.name!r} is used twice; judge names must be unique")
            seen.add(judge.name)
        return self

    @property
    def is_batch(self) -> bool:
        return self.execution.mode == "batch"

    @property
    def is_repo_mode(self) -> bool:
        return self.runner.workspace_mode == "repo"

    @property
    def scored_judges(self) -> list[JudgeConfig]:
        return [j for j in self.judges if j.name != "pairwise"]
