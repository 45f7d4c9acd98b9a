"""Where a run's models come from, chosen once: the real API (online), scripts (offline) or a recorded run (replay).

Four parties call a model: the agent (through the case's gateway channel),
the AskUserQuestion hook model (from the case's broker), the LLM judges and
the agent judges' own agents (through their own gateway channels).
Online, all of them use the host's credentials (never the sandbox's); offline,
each gets a scripted model server (`config/scripts.py` says which script),
behind the same gateway, so the real CLI runs end to end with no key and no
network. A replay is offline with each case's agent model served from the
cassette a recorded run left in that case's directory (gateway/replay.py);
the hook model and the judges are scripted as offline (they are not recorded).
Any of them can record (`run --record`): the case's gateway channel then writes
its cassette.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from agent_eval_sandbox.config import scripts
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.cassette import load_cassette
from agent_eval_sandbox.gateway.credentials import Credentials, upstream_url_from_env
from agent_eval_sandbox.gateway.gateway import ModelGateway
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.policy import GatewayPolicy
from agent_eval_sandbox.gateway.replay import Mismatch
from agent_eval_sandbox.gateway.replay_server import ReplayServer
from agent_eval_sandbox.gateway.script import Advance, Script, load_script, parse_script
from agent_eval_sandbox.interception import AnthropicAnswerer
from agent_eval_sandbox.model_api import ModelEndpoint
from agent_eval_sandbox.rundir.layout import CaseDir, split_epoch
from agent_eval_sandbox.rundir.read import open_finished_run
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.plan import Invocation

# What the offline servers accept instead of a key (they check none).
OFFLINE_CREDENTIAL = "agent-eval-sandbox-offline"
EMPTY_SCRIPT_TEXT = "(offline: this case has no model_script.yaml, so the scripted model has nothing to do)"
# Judges run four cases at once online; offline their script is consumed request by
# request, and one case at a time keeps it in case order.
ONLINE_JUDGE_PARALLELISM = 4


class ModelAccess(ABC):
    """The run's models. Context managers: whatever one starts, it stops."""

    offline: bool
    judge_parallelism: int
    # Each case's gateway channel writes its cassette (`run --record`).
    records: bool = False

    @abstractmethod
    def gateway(self, policy: GatewayPolicy) -> ModelGateway:
        """The run's model gateway (one channel per case)."""

    @abstractmethod
    def case_upstream(self, invocation: Invocation) -> AbstractContextManager[str | None]:
        """The upstream URL of this invocation's channel (None: the gateway's own)."""

    @abstractmethod
    def hook_answerer(self, invocation: Invocation) -> AbstractContextManager[AnthropicAnswerer | None]:
        """The hook model for this invocation's questions (None: answered without one)."""

    @abstractmethod
    def judge_endpoint(self) -> AbstractContextManager[ModelEndpoint | None]:
        """Where LLM judges call (None: the SDK's own environment)."""

    @contextmanager
    def step_upstream(self, invocation: Invocation, step_id: str) -> Iterator[str | None]:
        """The upstream of a pipeline's step, when it has one of its own (None: the case's)."""
        yield None

    @abstractmethod
    def judge_agent_upstream(self, case_id: str, judge: str, sample: int) -> AbstractContextManager[str | None]:
        """The upstream URL of one agent judge sample's gateway channel (None: the gateway's own).
        Raises JudgeScriptMissing offline when no script plays that judge's agent."""

    def pairwise_endpoint(self) -> AbstractContextManager[ModelEndpoint | None]:
        """Where the pairwise judge of a baseline comparison calls (None: the SDK's own environment)."""
        return nullcontext(None)

    def warnings(self, invocations: Sequence[Invocation]) -> list[str]:
        """What the user should know about these models for this plan; raises UserError when it cannot run."""
        return []

    def replay_mismatch(self, invocation: Invocation) -> Mismatch | None:
        """How a replayed invocation strayed from its cassette, once its upstream is closed (None: it did not)."""
        return None

    def close(self) -> None:
        """Release what lives for the whole run: by default nothing does."""
        return None


class JudgeScriptMissing(UserError):
    """Offline, no judge_scripts/<judge>.yaml plays an agent judge's agent on a case."""


class OnlineModels(ModelAccess):
    offline = False
    judge_parallelism = ONLINE_JUDGE_PARALLELISM

    def __init__(self, loaded: LoadedConfig, environ: Mapping[str, str], *, record: bool = False) -> None:
        self._loaded = loaded
        self._environ = dict(environ)
        self._answerer: AnthropicAnswerer | None = None
        self.records = record

    def gateway(self, policy: GatewayPolicy) -> ModelGateway:
        upstream_env = ac.gateway_upstream_env(self._loaded.config, self._environ)
        return ModelGateway(upstream_url_from_env(upstream_env), Credentials.from_env(upstream_env), policy=policy)

    @contextmanager
    def case_upstream(self, invocation: Invocation) -> Iterator[str | None]:
        yield None

    @contextmanager
    def hook_answerer(self, invocation: Invocation) -> Iterator[AnthropicAnswerer | None]:
        # One SDK client for the whole run, on the host's credentials.
        if self._answerer is None:
            self._answerer = AnthropicAnswerer(self._environ)
        yield self._answerer

    @contextmanager
    def judge_endpoint(self) -> Iterator[ModelEndpoint | None]:
        yield None

    @contextmanager
    def judge_agent_upstream(self, case_id: str, judge: str, sample: int) -> Iterator[str | None]:
        yield None

    def close(self) -> None:
        if self._answerer is not None:
            self._answerer.close()
            self._answerer = None


class OfflineModels(ModelAccess):
    offline = True
    judge_parallelism = 1

    def __init__(self, loaded: LoadedConfig, *, record: bool = False) -> None:
        self._loaded = loaded
        self.records = record

    def _model_script_path(self, invocation: Invocation) -> Path:
        return scripts.model_script_path([c.dir for c in invocation.cases], self._loaded.dataset_dir,
                                         batch=self._loaded.config.is_batch)

    def model_script(self, invocation: Invocation) -> Script:
        path = self._model_script_path(invocation)
        if path.is_file():
            return load_script(path)
        return parse_script([{"text": EMPTY_SCRIPT_TEXT}], source=f"{invocation.id} (no {path})")

    @contextmanager
    def step_upstream(self, invocation: Invocation, step_id: str) -> Iterator[str | None]:
        # Each step is a fresh CLI session, which a script answers from its first turn: a step
        # with a script of its own gets it; the others are answered by the case's script.
        path = scripts.step_script_path(invocation.cases[0].dir, step_id)
        if not path.is_file():
            yield None
            return
        with ScriptedModelServer(load_script(path)) as server:
            yield server.url

    def gateway(self, policy: GatewayPolicy) -> ModelGateway:
        # Every channel gets its own scripted upstream (case_upstream); nothing leaves the host.
        return ModelGateway("http://127.0.0.1:9", Credentials(api_key=OFFLINE_CREDENTIAL), policy=policy)

    @contextmanager
    def case_upstream(self, invocation: Invocation) -> Iterator[str | None]:
        with ScriptedModelServer(self.model_script(invocation)) as server:
            yield server.url

    @contextmanager
    def hook_answerer(self, invocation: Invocation) -> Iterator[AnthropicAnswerer | None]:
        case_dir = invocation.cases[0].dir if len(invocation.cases) == 1 and not self._loaded.config.is_batch else None
        path = scripts.hook_script_path(case_dir, self._loaded.root)
        if path is None:
            yield None
            return
        with ScriptedModelServer(load_script(path)) as server:
            answerer = AnthropicAnswerer({"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": OFFLINE_CREDENTIAL})
            try:
                yield answerer
            finally:
                answerer.close()

    def judge_endpoint(self) -> AbstractContextManager[ModelEndpoint | None]:
        return scripted_endpoint(scripts.judge_script_path(self._loaded.root), "the judge model")

    def pairwise_endpoint(self) -> AbstractContextManager[ModelEndpoint | None]:
        return scripted_endpoint(scripts.pairwise_script_path(self._loaded.root), "the pairwise judge's model")

    @contextmanager
    def judge_agent_upstream(self, case_id: str, judge: str, sample: int) -> Iterator[str | None]:
        # The case's dataset directory: its scripts are the eval's, never anything the run's agent wrote.
        # An epoch's case (`<id>#<n>`) is its dataset case's.
        case_dir = self._loaded.dataset_dir / split_epoch(case_id)[0]
        path = scripts.judge_agent_script_path(case_dir, self._loaded.root, judge, sample)
        if path is None:
            tried = scripts.judge_agent_script_candidates(case_dir, self._loaded.root, judge, sample)
            raise JudgeScriptMissing(
                f"offline: no script plays agent judge '{judge}' on case {case_id} "
                f"(looked for {', '.join(str(p) for p in tried)})",
                fix=f"write {scripts.JUDGE_AGENT_SCRIPTS}/{tried[1].name} in the case's directory or beside eval.yaml",
            )
        with ScriptedModelServer(load_script(path)) as server:
            yield server.url


@contextmanager
def scripted_endpoint(path: Path, what: str) -> Iterator[ModelEndpoint | None]:
    """A scripted judge model: the script at `path`, one step per request; without it, an error for each."""
    if path.is_file():
        script = load_script(path)
        if script.advance is not Advance.PER_REQUEST:
            script = script.model_copy(update={"advance": Advance.PER_REQUEST})
    else:
        script = parse_script(
            [{"error": {"status": 400, "message": f"offline run: no {path.name} beside eval.yaml scripts {what}"}}],
            source=f"(no {path.name})",
        )
    with ScriptedModelServer(script) as server:
        yield ModelEndpoint(base_url=server.url, api_key=OFFLINE_CREDENTIAL)


class ReplayModels(OfflineModels):
    """Offline, with each case's agent model served from its cassette in a recorded run."""

    def __init__(self, loaded: LoadedConfig, recorded_run: Path, *, settings: RunSettings, claude_version: str,
                 record: bool = False) -> None:
        super().__init__(loaded, record=record)
        self._recorded = open_finished_run(recorded_run)
        self._settings = settings
        self._claude_version = claude_version
        self._mismatches: dict[str, Mismatch | None] = {}
        self._lock = threading.Lock()

    @contextmanager
    def step_upstream(self, invocation: Invocation, step_id: str) -> Iterator[str | None]:
        yield None  # the case's cassette holds every step's exchanges

    def cassette_path(self, invocation: Invocation) -> Path:
        run = self._recorded.dir
        out: CaseDir = run.batch_logs if self._loaded.config.is_batch else run.case(invocation.id)
        return out.cassette

    @contextmanager
    def case_upstream(self, invocation: Invocation) -> Iterator[str | None]:
        server = ReplayServer(load_cassette(self.cassette_path(invocation))).start()
        try:
            yield server.url
        finally:
            # The case's channel closed first (it was opened after this): every request is over.
            server.close()
            with self._lock:
                self._mismatches[invocation.id] = server.verdict()

    def replay_mismatch(self, invocation: Invocation) -> Mismatch | None:
        with self._lock:
            return self._mismatches.get(invocation.id)

    def warnings(self, invocations: Sequence[Invocation]) -> list[str]:
        missing = [inv.id for inv in invocations if not self.cassette_path(inv).is_file()]
        if missing:
            more = f" (+{len(missing) - 5})" if len(missing) > 5 else ""
            raise UserError(
                f"--replay {self._recorded.dir.root}: no cassette for {', '.join(missing[:5])}{more}",
                fix="replay a run recorded with `run --record` (cases/<id>/cassette.jsonl), of the same cases",
            )
        return self._setting_warnings()

    def _setting_warnings(self) -> list[str]:
        """Settings that change the CLI's requests, where they differ from the recorded run's."""
        meta = self._recorded.meta
        settings = meta.get("settings")
        recorded: Mapping[str, object] = settings if isinstance(settings, Mapping) else {}
        differences = [
            (name, was, now)
            for name, was, now in (
                ("claude_version", meta.get("claude_version"), self._claude_version),
                ("model", recorded.get("model"), self._settings.model),
                ("max_budget_usd", recorded.get("max_budget_usd"), self._settings.max_budget_usd),
            )
            if was is not None and was != now
        ]
        return [f"--replay: {name} is {now!r}, the recorded run had {was!r}: the CLI's requests may not match "
                "its cassettes (replay_mismatch)" for name, was, now in differences]


def model_access(loaded: LoadedConfig, *, offline: bool, environ: Mapping[str, str] | None = None,
                 record: bool = False, replay: Path | None = None, settings: RunSettings | None = None,
                 claude_version: str = "") -> ModelAccess:
    """The run's models: a replay of a recorded run (`replay`, with this run's settings and CLI version), else
    offline or online; any of them recording when `record`."""
    if replay is not None:
        if settings is None:
            raise ValueError("a replay needs the run's settings")
        return ReplayModels(loaded, replay, settings=settings, claude_version=claude_version, record=record)
    if offline:
        return OfflineModels(loaded, record=record)
    return OnlineModels(loaded, os.environ if environ is None else environ, record=record)
