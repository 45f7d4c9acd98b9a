"""Model access for sandboxed cases.

`ModelGateway` is the host-side gateway (credentials, budget, request log) that
containers reach over a per-case unix socket; `ScriptedModelServer` answers
the Messages API from a script, for offline runs, tests and LLM judges.
"""

from agent_eval_sandbox.gateway.credentials import Credentials, upstream_url_from_env
from agent_eval_sandbox.gateway.gateway import (
    BUDGET_REFUSAL_STATUS,
    Channel,
    ModelGateway,
)
from agent_eval_sandbox.gateway.model_server import (
    ScriptedModelServer,
    ServedRequest,
    serve,
)
from agent_eval_sandbox.gateway.script import Script, load_script, parse_script
from agent_eval_sandbox.gateway.usage import Usage

__all__ = [
    "BUDGET_REFUSAL_STATUS",
    "Channel",
    "Credentials",
    "ModelGateway",
    "Script",
    "ScriptedModelServer",
    "ServedRequest",
    "Usage",
    "load_script",
    "parse_script",
    "serve",
    "upstream_url_from_env",
]
