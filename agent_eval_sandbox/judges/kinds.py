"""Judges behind one protocol: a `Judge` per kind, registered by kind.

    judge = make_judge(config, JudgeSetup(loaded, environ))
    result, samples = judge.score(record, outputs_json, services)

A kind turns its `judges[]` entry into something that scores one case's
`outputs` record: python judge code (check snippets, module/function, python
builtins) runs in the worker processes under a time limit; LLM judges (prompts
and `.md` builtins) call the judge model; agent judges run `claude -p` in
sandboxes of their own, planned here (`AgentJudge.jobs`) and run by
app/agent_judging.py. What every
kind shares — the `if` condition, a judge that cannot run on any case — is
`Judge.precheck`, before the kind's own `_score`. Whatever a judge does on a
case becomes a result, never an exception.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.models import DEFAULT_AGENT_JUDGE_TIMEOUT_S, IMPLEMENTED_RUNNER_TYPES, JudgeConfig
from agent_eval_sandbox.judges.agent import (
    AgentJudgeJob,
    AgentRunOutput,
    context_names,
    contract,
    select_inputs,
    verdict_of,
)
from agent_eval_sandbox.judges.aggregate import reduce_samples
from agent_eval_sandbox.judges.condition import ConditionError, evaluate_condition
from agent_eval_sandbox.judges.llm import ModelJudge
from agent_eval_sandbox.judges.prompt import (
    JudgePromptError,
    compile_prompt,
    missing_model_message,
    resolve_judge_model,
)
from agent_eval_sandbox.judges.record import to_jsonable
from agent_eval_sandbox.judges.registry import find_builtin, unknown_builtin_message
from agent_eval_sandbox.judges.results import CaseResult, JudgeMeta, Sample
from agent_eval_sandbox.judges.template import PromptRenderError, render_prompt
from agent_eval_sandbox.judges.verdict import Scale, check_value, scale_for
from agent_eval_sandbox.judges.worker_pool import WorkerPool, encode_json


@dataclass(frozen=True)
class JudgeSetup:
    """What making a judge needs: the eval (paths, models) and the host's environment."""

    loaded: LoadedConfig
    environ: Mapping[str, str]
    samples: int | None = None  # overrides every LLM judge's `samples`


@dataclass(frozen=True)
class JudgeServices:
    """What scoring needs at run time, shared by every judge and case."""

    pool: WorkerPool
    models: ModelJudge
    timeout_s: float


Outcome = tuple[CaseResult, list[Sample]]


class Judge(ABC):
    """One `judges[]` entry, ready to score cases."""

    kind: ClassVar[str]

    def __init__(self, config: JudgeConfig, *, judge_type: str | None = None) -> None:
        self.config = config
        self.judge_type = judge_type or config.kind
        # Set by a kind that cannot run at all: every case errors with this reason.
        self.broken: str | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def meta(self) -> JudgeMeta:
        return JudgeMeta(self.config.name, self.judge_type, self.config.score_range, self.config.feedback_type)

    def score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        """This judge's verdict on one case; never raises."""
        early = self.precheck(record)
        if early is not None:
            return early
        try:
            return self._score(record, outputs_json, services)
        except Exception as exc:  # a bug of ours must still cost only this judge on this case
            return CaseResult.errored(self.judge_type, f"internal error while judging: {type(exc).__name__}: {exc}"), []

    def precheck(self, record: dict[str, Any]) -> Outcome | None:
        """The outcome before the kind's own work: skipped by `if`, or the judge cannot run; else None."""
        condition = self.config.if_
        if condition is not None:
            try:
                applies = evaluate_condition(condition, record)
            except ConditionError as exc:
                return CaseResult.errored(self.judge_type, str(exc)), []
            if not applies:
                return CaseResult.skipped(self.judge_type, f"Skipped: condition '{condition}' is false"), []
        if self.broken:
            return CaseResult.errored(self.judge_type, self.broken), []
        return None

    @abstractmethod
    def _score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome: ...


class UnavailableJudge(Judge):
    """A judge this tool cannot run: every case is skipped, with the reason."""

    kind = "unavailable"

    def __init__(self, config: JudgeConfig, reason: str) -> None:
        super().__init__(config)
        self.reason = reason

    def score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        return CaseResult.skipped(self.judge_type, self.reason), []

    def _score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        raise AssertionError("unreachable")


class CodeJudge(Judge):
    """Python judge code, run in a worker process: a check snippet, a module's function, a python builtin."""

    kind = "code"

    def __init__(self, config: JudgeConfig, spec: Mapping[str, Any], *, judge_type: str | None = None) -> None:
        super().__init__(config, judge_type=judge_type)
        self.spec = encode_json(dict(spec))
        self.arguments = encode_json(to_jsonable(config.arguments))

    def _score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        with services.pool.worker() as worker:
            sample = worker.call(self.spec, self.arguments, outputs_json, services.timeout_s)
        sample = check_value(sample, self.config.score_range)
        return CaseResult.from_sample(self.judge_type, sample), [sample]


class LlmJudge(Judge):
    """A prompt scored by the judge model, `samples` times and reduced (median or majority)."""

    kind = "llm"

    def __init__(self, config: JudgeConfig, setup: JudgeSetup, template: str, scale: Scale,
                 *, judge_type: str | None = None) -> None:
        super().__init__(config, judge_type=judge_type)
        self.template = template
        self.scale = scale
        self.samples = setup.samples if setup.samples is not None else config.samples
        self.model = resolve_judge_model(config, setup.loaded.config, setup.environ)
        if self.model is None:
            self.broken = missing_model_message(config.name)

    def _score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        assert self.model is not None
        try:
            prompt = render_prompt(self.template, record, self.config.arguments)
        except PromptRenderError as exc:
            return CaseResult.errored(self.judge_type, str(exc)), []
        samples = [services.models.sample(prompt, self.scale, self.model) for _ in range(max(1, self.samples))]
        return reduce_samples(self.judge_type, samples), samples


class AgentJudge(Judge):
    """An LLM judge with an `agent:` block: `claude -p` in a sandbox of its own, `samples` times, reduced.

    Scoring a run plans every case's samples first (`jobs`) and runs them side by side
    (app/agent_judging.py); `_score` is the same, one sample after the other.
    """

    kind = "agent"

    def __init__(self, config: JudgeConfig, setup: JudgeSetup, template: str, scale: Scale) -> None:
        super().__init__(config)
        agent = config.agent
        assert agent is not None
        eval_config = setup.loaded.config
        self.template = template
        self.scale = scale
        self.samples = max(1, setup.samples if setup.samples is not None else config.samples)
        self.model = resolve_judge_model(config, eval_config, setup.environ)
        self.timeout_s = float(agent.timeout or eval_config.execution.timeout or DEFAULT_AGENT_JUDGE_TIMEOUT_S)
        self.inputs = select_inputs(eval_config.outputs, agent.inputs)
        self.context = tuple(setup.loaded.paths.project_file(entry) for entry in agent.context)
        if self.model is None:
            self.broken = missing_model_message(config.name)
        elif agent.runner.type not in IMPLEMENTED_RUNNER_TYPES:
            self.broken = (f"agent.runner.type '{agent.runner.type}' is not implemented: agent judges run "
                           f"{', '.join(sorted(IMPLEMENTED_RUNNER_TYPES))} in their sandbox")

    def jobs(self, record: dict[str, Any], case_id: str, case_dir: Path) -> list[AgentJudgeJob] | Outcome:
        """One job per sample, or the case's outcome when there is nothing to run (after `precheck`)."""
        agent = self.config.agent
        assert agent is not None and self.model is not None
        try:
            instructions = render_prompt(self.template, record, self.config.arguments)
        except PromptRenderError as exc:
            return CaseResult.errored(self.judge_type, str(exc)), []
        context = tuple(path for path in self.context if path.exists())
        prompt = instructions + contract(self.scale, self.inputs, context_names(context))
        return [
            AgentJudgeJob(
                judge=self.name, case_id=case_id, case_dir=case_dir, sample=sample, samples=self.samples,
                prompt=prompt, model=self.model, inputs=self.inputs, context=context,
                allowed_tools=tuple(agent.allowed_tools), timeout_s=self.timeout_s, budget_usd=agent.max_budget_usd,
                runner=agent.runner,
            )
            for sample in range(1, self.samples + 1)
        ]

    def conclude(self, runs: Sequence[AgentRunOutput]) -> Outcome:
        """The case's result from what its samples left: median or majority, as for LLM judges."""
        samples = [verdict_of(run, self.scale) for run in runs]
        return reduce_samples(self.judge_type, samples), samples

    def _score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        # Never called by score_run, which plans agent judges (`jobs`) and runs them in sandboxes.
        return CaseResult.errored(self.judge_type, "an agent judge runs in a sandbox of its own, not in-process"), []


class BrokenJudge(Judge):
    """A judge whose configuration cannot work (an unknown builtin, a missing prompt file)."""

    kind = "broken"

    def __init__(self, config: JudgeConfig, reason: str) -> None:
        super().__init__(config)
        self.broken = reason

    def _score(self, record: dict[str, Any], outputs_json: bytes, services: JudgeServices) -> Outcome:
        raise AssertionError("unreachable: a broken judge errors before scoring")


# ---- the kinds, by eval.yaml's judge type ------------------------------------------------


def _check(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    return CodeJudge(config, {"kind": "check", "name": config.name, "source": config.check})


def _module(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    return CodeJudge(config, {"kind": "module", "module": config.module, "function": config.function})


def _builtin(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    entry = find_builtin(config.builtin or "")
    if entry is None:
        return BrokenJudge(config, unknown_builtin_message(config.builtin or ""))
    if entry.kind == "python":
        return CodeJudge(config, {"kind": "file", "path": str(entry.path), "function": "judge"})
    return LlmJudge(config, setup, entry.path.read_text(encoding="utf-8"), scale_for(config, force_bool=True))


def _llm(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    try:
        template = compile_prompt(config, setup.loaded.paths)
    except JudgePromptError as exc:
        return BrokenJudge(config, exc.render())
    return LlmJudge(config, setup, template, scale_for(config))


def _agent(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    try:
        template = compile_prompt(config, setup.loaded.paths, agent=True)
    except JudgePromptError as exc:
        return BrokenJudge(config, exc.render())
    return AgentJudge(config, setup, template, scale_for(config))


def _skip(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    return UnavailableJudge(
        config, "the judge sets none of builtin, check, llm_rubric/prompt/prompt_file or module+function")


JudgeFactory = Callable[[JudgeConfig, JudgeSetup], Judge]
KINDS: dict[str, JudgeFactory] = {
    "check": _check,
    "code": _module,
    "builtin": _builtin,
    "llm": _llm,
    "agent": _agent,
    "skip": _skip,
}


def register_kind(kind: str, factory: JudgeFactory) -> None:
    """Add (or replace) the judge of one eval.yaml judge type."""
    KINDS[kind] = factory


def make_judge(config: JudgeConfig, setup: JudgeSetup) -> Judge:
    return KINDS[config.kind](config, setup)
