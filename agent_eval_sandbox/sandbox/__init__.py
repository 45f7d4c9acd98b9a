"""Sandboxes: the `Sandbox` interface, its backends, and the sandbox image.

Only this package imports `docker` (and, later, `kubernetes`); the rest of the
tool sees the types re-exported here and picks a backend by name.
"""

from agent_eval_sandbox.sandbox.archive import CopyInReport, CopyOutReport, SkippedEntry
from agent_eval_sandbox.sandbox.base import (
    BindMount,
    EndReason,
    ExecResult,
    Hardening,
    Limits,
    RemovedObject,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxInfraError,
    SandboxSpec,
)
from agent_eval_sandbox.sandbox.registry import (
    backend_names,
    get_backend,
    register_backend,
)
from agent_eval_sandbox.sandbox.teardown import run_scope

__all__ = [
    "BindMount",
    "CopyInReport",
    "CopyOutReport",
    "EndReason",
    "ExecResult",
    "Hardening",
    "Limits",
    "RemovedObject",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxInfraError",
    "SandboxSpec",
    "SkippedEntry",
    "backend_names",
    "get_backend",
    "register_backend",
    "run_scope",
]
