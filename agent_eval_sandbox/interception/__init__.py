"""Tool interception: compiled handlers, the host-side hook broker, permissions as CLI and OS rules.

The runner's view:

- `compile_handlers(loaded)` -> the case handlers (None: no `inputs.tools`);
  `write_handlers(...)` backs `agent-eval-sandbox compile-handlers`.
- `build_container_settings(...)` -> the workspace `.claude/settings.json`,
  the read-only managed settings and the extra `claude` flags.
- `deny_filter(config)` -> the predicate of workspace paths left out of the container.
- `Broker(...)` per case, on a unix socket mounted read-only into the
  container, logging to `cases/<id>/tool_decisions.jsonl`; `AnthropicAnswerer`
  answers questions with the hook model, `MeteredAnswerer` pays its calls from
  the case's budget (its gateway channel).
"""

from agent_eval_sandbox.interception.answerer import AnthropicAnswerer, MeteredAnswerer
from agent_eval_sandbox.interception.broker import (
    Broker,
    BrokerLimits,
)
from agent_eval_sandbox.interception.compiler import (
    compile_handlers,
    extract_patterns,
    write_handlers,
)
from agent_eval_sandbox.interception.decision import (
    CaseContext,
    Decision,
    ToolEvent,
    decide,
)
from agent_eval_sandbox.interception.handlers import (
    HANDLERS_FILE_NAME,
    HandlersError,
    ToolHandlers,
)
from agent_eval_sandbox.interception.paths import PathDenyFilter, deny_filter
from agent_eval_sandbox.interception.permissions import (
    compile_permission_rules,
    compile_permissions,
)
from agent_eval_sandbox.interception.settings import (
    MANAGED_SETTINGS_PATH,
    ContainerSettings,
    build_container_settings,
)

__all__ = [
    "HANDLERS_FILE_NAME",
    "MANAGED_SETTINGS_PATH",
    "AnthropicAnswerer",
    "Broker",
    "BrokerLimits",
    "CaseContext",
    "ContainerSettings",
    "Decision",
    "HandlersError",
    "MeteredAnswerer",
    "PathDenyFilter",
    "ToolEvent",
    "ToolHandlers",
    "build_container_settings",
    "compile_handlers",
    "compile_permission_rules",
    "compile_permissions",
    "decide",
    "deny_filter",
    "extract_patterns",
    "write_handlers",
]
