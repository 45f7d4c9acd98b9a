"""Backends by name (`sandbox.backend` in eval.yaml). A backend module is imported only when chosen."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.sandbox.base import SandboxBackend

if TYPE_CHECKING:  # config.models imports sandbox.defaults, which loads this package
    from agent_eval_sandbox.config.models import SandboxConfig

BackendFactory = Callable[..., SandboxBackend]

# name -> "module:attribute", so that choosing docker never imports kubernetes and back.
_BUILTIN = {
    "docker": "agent_eval_sandbox.sandbox.docker_backend:DockerBackend",
    "kubernetes": "agent_eval_sandbox.sandbox.kubernetes_backend:KubernetesBackend",
}
_registered: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    if name in _registered or name in _BUILTIN:
        raise ValueError(f"sandbox backend {name!r} is already registered")
    _registered[name] = factory


def backend_names() -> list[str]:
    return sorted({*_BUILTIN, *_registered})


def get_backend(name: str, **options: Any) -> SandboxBackend:
    """A new backend instance (it does not talk to anything until first used)."""
    factory = _registered.get(name)
    if factory is None and name in _BUILTIN:
        module, _, attr = _BUILTIN[name].partition(":")
        factory = getattr(importlib.import_module(module), attr)
    if factory is None:
        raise ConfigError(
            f"unknown sandbox backend {name!r}",
            field="sandbox.backend",
            fix=f"use one of: {', '.join(backend_names())}",
        )
    return factory(**options)


def backend_for(config: SandboxConfig, *, allow_unenforced_network: bool = False,
                warn: Callable[[str], None] | None = None) -> SandboxBackend:
    """The backend `sandbox.backend` names, given the settings it reads from the `sandbox:` block."""
    if config.backend == "kubernetes":
        return get_backend("kubernetes", config=config, allow_unenforced_network=allow_unenforced_network, warn=warn)
    return get_backend(config.backend)
