"""Where a run's models come from, chosen once: the real API (online) or scripts (offline).

Three parties call a model: the agent (through the case's gateway channel),
the AskUserQuestion hook model (from the case's broker) and the LLM judges.
Online, all three use the host's credentials (never the sandbox's); offline,
each gets a scripted model server (`config/scripts.py` says which script),
behind the same gateway, so the real CLI runs end to end with no key and no
network.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from agent_eval_sandbox.config import scripts
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.gateway.credentials import Credentials, upstream_url_from_env
from agent_eval_sandbox.gateway.gateway import ModelGateway
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.policy import GatewayPolicy
from agent_eval_sandbox.gateway.script import Advance, Script, load_script, parse_script
from agent_eval_sandbox.interception import AnthropicAnswerer
from agent_eval_sandbox.model_api import ModelEndpoint
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

    def close(self) -> None:
        """Release what lives for the whole run: by default nothing does."""
        return None


class OnlineModels(ModelAccess):
    offline = False
    judge_parallelism = ONLINE_JUDGE_PARALLELISM

    def __init__(self, loaded: LoadedConfig, environ: Mapping[str, str]) -> None:
        self._loaded = loaded
        self._environ = dict(environ)
        self._answerer: AnthropicAnswerer | None = None

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

    def close(self) -> None:
        if self._answerer is not None:
            self._answerer.close()
            self._answerer = None


class OfflineModels(ModelAccess):
    offline = True
    judge_parallelism = 1

    def __init__(self, loaded: LoadedConfig) -> None:
        self._loaded = loaded

    def _model_script_path(self, invocation: Invocation) -> Path:
        return scripts.model_script_path([c.dir for c in invocation.cases], self._loaded.dataset_dir,
                                         batch=self._loaded.config.is_batch)

    def model_script(self, invocation: Invocation) -> Script:
        path = self._model_script_path(invocation)
        if path.is_file():
            return load_script(path)
        return parse_script([{"text": EMPTY_SCRIPT_TEXT}], source=f"{invocation.id} (no {path})")

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

    @contextmanager
    def judge_endpoint(self) -> Iterator[ModelEndpoint | None]:
        path = scripts.judge_script_path(self._loaded.root)
        if path.is_file():
            script = load_script(path)
            if script.advance is not Advance.PER_REQUEST:
                script = script.model_copy(update={"advance": Advance.PER_REQUEST})
        else:
            script = parse_script(
                [{"error": {"status": 400, "message": f"offline run: no {scripts.JUDGE_SCRIPT} beside eval.yaml "
                                                     "scripts the judge model"}}],
                source=f"(no {scripts.JUDGE_SCRIPT})",
            )
        with ScriptedModelServer(script) as server:
            yield ModelEndpoint(base_url=server.url, api_key=OFFLINE_CREDENTIAL)


def model_access(loaded: LoadedConfig, *, offline: bool, environ: Mapping[str, str] | None = None) -> ModelAccess:
    return OfflineModels(loaded) if offline else OnlineModels(loaded, os.environ if environ is None else environ)
