"""The typed records of a run: what `cases/<id>/run_result.json`, `run_result.json` and `run.json` hold.

`CaseOutcome` is where one case's pipeline ends and what the judges and the
reports read back; `RunResult` is the reference's run-level shape, computed
from the outcomes (pure). Read back with `extra="allow"`: a run written by a
newer version keeps what this one does not know.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, model_validator

EndReason = Literal[
    "exited",  # the agent's command ended by itself (any exit code)
    "timed_out", "oom_killed", "signaled", "budget_exhausted",  # it ran and was stopped
    "hook_failed",  # a lifecycle hook of the case failed
    "error",  # the case failed in a way of its own (its staging, its sandbox, its copy-out)
    "infra_error",  # the tool's own plumbing failed (gateway, Docker API): not the skill's doing
    "interrupted",  # the run was stopped (Ctrl-C, SIGTERM) before the case finished
    "replay_mismatch",  # a replayed case sent a request its cassette does not hold
]

# Reasons after which the agent's work is whole: it ended by itself.
COMPLETED_REASONS: frozenset[str] = frozenset({"exited"})


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class GatewayUse(_Record):
    """What the case's gateway channel saw: requests, budget refusals, spend."""

    requests: int = 0
    refused: int = 0
    spent_usd: float = 0.0


# How much of what the agent made a case record lists: the record is read whole by the
# judges and the reports, and must stay small whatever the agent did.
MAX_LISTED = 1000
MAX_DENIALS = 100
MAX_DENIAL_INPUT_CHARS = 2000


class Changes(_Record):
    """What changed in the workspace: at most MAX_LISTED names of each kind, and how many there were."""

    added: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)  # every change, listed or not
    truncated: bool = False

    @classmethod
    def listing(cls, added: Sequence[str], modified: Sequence[str], deleted: Sequence[str]) -> Changes:
        lists = {"added": list(added), "modified": list(modified), "deleted": list(deleted)}
        return cls(**{k: v[:MAX_LISTED] for k, v in lists.items()},
                   counts={k: len(v) for k, v in lists.items()},
                   truncated=any(len(v) > MAX_LISTED for v in lists.values()))


def bounded_denials(denials: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The CLI's permission denials as a record keeps them: the first MAX_DENIALS, long inputs cut."""
    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > MAX_DENIAL_INPUT_CHARS:
            return value[:MAX_DENIAL_INPUT_CHARS] + f"…[truncated: {len(value)} chars]"
        if isinstance(value, Mapping):
            return {str(k): cut(v) for k, v in list(value.items())[:50]}
        if isinstance(value, list):
            return [cut(v) for v in value[:50]]
        return value

    return [cut(dict(d)) for d in denials[:MAX_DENIALS]]


class Integrity(_Record):
    """The check of the agent's stream against the gateway's own record (runner/integrity.py)."""

    checked: bool = False
    dropped: int = 0
    unverified: int = 0
    findings: list[dict[str, Any]] = Field(default_factory=list)


class _AgentRecord(_Record):
    """What a case's and a step's records share: whether the agent ran, and whether it ended by itself.
    (Their fields stay declared in each, in the order their JSON lists them.)"""

    if TYPE_CHECKING:
        end_reason: EndReason
        agent_duration_s: float | None

    @model_validator(mode="before")
    @classmethod
    def _derived_fields_are_not_read(cls, data: Any) -> Any:
        # `ran` and `completed` are written for readers of the JSON; read back, they are recomputed.
        if isinstance(data, Mapping) and ("ran" in data or "completed" in data):
            return {k: v for k, v in data.items() if k not in ("ran", "completed")}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ran(self) -> bool:
        """The agent's command was started in the sandbox (whatever became of it)."""
        return self.agent_duration_s is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def completed(self) -> bool:
        """The agent ran and ended by itself: its work is whole, whatever its exit code."""
        return self.ran and self.end_reason in COMPLETED_REASONS

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class StepOutcome(_AgentRecord):
    """One step of a pipeline (`execution.steps`): how its own `claude -p` ended and what it used.

    A step that never started (an earlier `on_failure: fail` step failed, or the case's deadline
    or budget ran out) has `ran: false` and says why in `skipped`.
    """

    step_id: str = ""
    index: int = 0
    exit_code: int | None = None
    end_reason: EndReason = "error"
    signal: int | None = None
    duration_s: float | None = None
    agent_duration_s: float | None = None
    started_at: float | None = None
    timeout_s: float | None = None  # the step's deadline: min(its own, what was left of the case's)
    budget_usd: float | None = None  # the step's cap: min(its own, what was left of the case's)
    token_usage: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None
    cli_cost_usd: float | None = None
    gateway: GatewayUse = Field(default_factory=GatewayUse)
    num_turns: int | None = None
    permission_denials: list[dict[str, Any]] = Field(default_factory=list)
    limits_hit: list[str] = Field(default_factory=list)
    session_id: str | None = None
    result: str | None = None
    files: list[str] = Field(default_factory=list)  # workspace files the step added or modified
    integrity: Integrity = Field(default_factory=Integrity)
    on_failure: str = "fail"
    skipped: str | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        """What `on_failure` acts on: the step did not end by itself with exit code 0."""
        return not self.completed or self.exit_code != 0


class CaseOutcome(_AgentRecord):
    """How one invocation (a case; in batch mode, all of them) ended, and what it used."""

    case_id: str = ""
    cases: list[str] = Field(default_factory=list)
    exit_code: int | None = None
    end_reason: EndReason = "error"
    signal: int | None = None
    duration_s: float | None = None
    # Time inside the agent's exec; duration_s minus this is the controller's overhead.
    agent_duration_s: float | None = None
    started_at: float | None = None
    token_usage: dict[str, int] = Field(default_factory=dict)  # of everything the case's gateway channel paid for
    cli_token_usage: dict[str, int] = Field(default_factory=dict)  # as the CLI's final result reported it
    cost_usd: float | None = None
    cli_cost_usd: float | None = None
    gateway: GatewayUse = Field(default_factory=GatewayUse)
    num_turns: int | None = None
    permission_denials: list[dict[str, Any]] = Field(default_factory=list)
    limits_hit: list[str] = Field(default_factory=list)
    oom_kills: int | None = None
    session_id: str | None = None
    model: str | None = None
    result: str | None = None
    changes: Changes = Field(default_factory=Changes)
    integrity: Integrity = Field(default_factory=Integrity)
    error: str | None = None
    # A pipeline's steps in order, run or not (empty for a single invocation).
    steps: list[StepOutcome] = Field(default_factory=list)

    def step(self, step_id: str) -> StepOutcome | None:
        return next((s for s in self.steps if s.step_id == step_id), None)


class RunResult(_Record):
    """`run_result.json`: the reference's run-level shape, plus `end_reasons` and `per_case`."""

    exit_code: int = 0
    duration_s: float = 0.0
    wall_clock_s: float = 0.0
    cost_usd: float = 0.0
    token_usage: dict[str, int] = Field(default_factory=dict)
    num_turns: int = 0
    num_cases: int = 0
    model: str | None = None
    agent: str = "claude-code"
    agent_version: str | None = None
    permission_denials: list[dict[str, Any]] = Field(default_factory=list)
    execution_mode: str = "case"
    end_reasons: dict[str, str] = Field(default_factory=dict)
    per_case: dict[str, CaseOutcome] = Field(default_factory=dict)
    # A run stopped by Ctrl-C/SIGTERM is marked: `planned` cases, of which `finished` got an outcome.
    interrupted: bool = False
    planned: int = 0
    finished: int = 0

    @classmethod
    def from_outcomes(
        cls,
        outcomes: Sequence[CaseOutcome],
        *,
        mode: str,
        model: str | None,
        wall_clock_s: float,
        agent_version: str | None,
        planned: int | None = None,
        interrupted: bool = False,
    ) -> RunResult:
        """The run's totals (pure). Its exit code is the worst of the cases': a case that
        never exited counts as 1; otherwise the largest code by magnitude."""
        usage: dict[str, int] = {}
        for outcome in outcomes:
            for key, value in outcome.token_usage.items():
                usage[key] = usage.get(key, 0) + int(value)
        worst = 0
        for code in (o.exit_code for o in outcomes):
            if code is None:
                worst = worst or 1
            elif code != 0 and (worst == 0 or abs(code) > abs(worst)):
                worst = code
        per_case: dict[str, CaseOutcome] = {}
        for outcome in outcomes:
            for case_id in outcome.cases or [outcome.case_id]:
                per_case[case_id] = outcome
        return cls(
            exit_code=worst,
            duration_s=round(sum(o.duration_s or 0.0 for o in outcomes), 3),
            wall_clock_s=round(wall_clock_s, 3),
            cost_usd=round(sum(o.cost_usd or 0.0 for o in outcomes), 6),
            token_usage=usage,
            num_turns=sum(o.num_turns or 0 for o in outcomes),
            num_cases=len(per_case),
            model=model,
            agent_version=agent_version,
            permission_denials=[d for o in outcomes for d in o.permission_denials],
            execution_mode=mode,
            end_reasons={o.case_id: o.end_reason for o in outcomes},
            per_case=per_case,
            interrupted=interrupted,
            planned=len(per_case) if planned is None else planned,
            finished=sum(1 for o in per_case.values() if o.end_reason != "interrupted"),
        )

    def to_data(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def parse_outcome(data: object) -> CaseOutcome | None:
    """A stored case outcome; a field that is damaged is left out (unknown), not the whole record.
    None when nothing of it is usable."""
    if not isinstance(data, Mapping):
        return None
    record = dict(data)
    for _ in range(len(record) + 1):
        try:
            return CaseOutcome.model_validate(record)
        except ValidationError as exc:
            bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
            if not bad & set(record):
                return None
            for key in bad:
                record.pop(key, None)
    return None
