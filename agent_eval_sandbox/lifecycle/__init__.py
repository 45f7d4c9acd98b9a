"""Lifecycle hooks: eval.yaml's `hooks:` phases, on the host or inside a case's sandbox.

    hooks = HookRunner(RunInfo(...), report=console_printer)
    with hooks.around_run(config.hooks) as before_all:      # after_all in a finally
        for case in cases:                                  # (parallel: the runner is stateless)
            with hooks.around_case(config.hooks, CaseInfo(...), sandbox=get_sandbox) as before_each:
                outputs = before_all.outputs.merged(before_each.outputs)  # the case wins
                ...  # agent with outputs.env; judges get outputs.data   # after_each in a finally
        hooks.run(Phase.BEFORE_SCORING, config.hooks.before_scoring)

`get_sandbox` may be the sandbox itself or a function returning it (creating
it on first call): host-scope before_each hooks then prepare the host
workspace before it is copied in, and a case whose before_each has no
container-scope hook does not wait for a sandbox.

runner.py holds the failure rules, host.py the process handling on the
host, container.py the container-scope hooks, env.py what hooks are told.
"""

from agent_eval_sandbox.lifecycle.env import (
    CaseInfo,
    RunInfo,
    container_env,
    host_cwd,
    host_env,
)
from agent_eval_sandbox.lifecycle.model import (
    HookFailed,
    HookResult,
    HookStatus,
    Phase,
    PhaseResult,
)
from agent_eval_sandbox.lifecycle.runner import (
    CONDITION_TIMEOUT_S,
    HookRunner,
    NoSandboxError,
    Reporter,
    SandboxSource,
    log_name,
    print_to_stderr,
)

__all__ = [
    "CONDITION_TIMEOUT_S",
    "CaseInfo",
    "HookFailed",
    "HookResult",
    "HookRunner",
    "HookStatus",
    "NoSandboxError",
    "Phase",
    "PhaseResult",
    "Reporter",
    "RunInfo",
    "SandboxSource",
    "container_env",
    "host_cwd",
    "host_env",
    "log_name",
    "print_to_stderr",
]
