"""The `sandbox:` block of eval.yaml as the backend's spec: limits, hardening, mounts (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from agent_eval_sandbox.config.models import SandboxConfig
from agent_eval_sandbox.sandbox.base import BindMount, Hardening, Limits, SandboxSpec
from agent_eval_sandbox.sandbox.defaults import parse_size

# How long past a case's own timeout its sandbox may live before any reaper, on any
# host, may remove it: hooks run on top of the agent. This process removes its own.
STALE_AFTER_S = 3600


def limits_of(config: SandboxConfig) -> Limits:
    return Limits(
        cpus=config.cpus,
        memory_bytes=parse_size(config.memory),
        pids=config.pids,
        workspace_bytes=parse_size(config.disk),
        tmp_bytes=parse_size(config.tmp_size),
        home_bytes=parse_size(config.home_size),
    )


def hardening_of(config: SandboxConfig) -> Hardening:
    return Hardening(
        user=config.user,
        read_only_root=config.read_only_root,
        cap_drop=tuple(config.cap_drop),
        cap_add=tuple(config.cap_add),
        no_new_privileges=config.no_new_privileges,
        init=config.init,
        network=config.network,
        runtime=config.runtime,
    )


def sandbox_spec(
    config: SandboxConfig,
    *,
    image: str,
    run_id: str,
    case_id: str,
    timeout_s: float,
    now: float,
    mounts: Sequence[BindMount] = (),
    standby: Sequence[str] = (),
) -> SandboxSpec:
    return SandboxSpec(
        image=image,
        run_id=run_id,
        case_id=case_id,
        deadline_epoch=now + timeout_s + STALE_AFTER_S,
        limits=limits_of(config),
        hardening=hardening_of(config),
        mounts=tuple(mounts),
        standby=tuple(standby),
    )
