"""The spec -> Docker arguments mapping and the backend registry (no daemon is contacted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.errors import ConfigError, DockerUnavailableError, RuntimeNotRegisteredError
from agent_eval_sandbox.sandbox import registry
from agent_eval_sandbox.sandbox.base import BindMount, Hardening, Limits, SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import (
    DockerBackend,
    cpu_quota_us,
    host_config_args,
    no_network,
    tmpfs_volume_options,
)

MiB = 1024 * 1024


def spec(**changes) -> SandboxSpec:
    return SandboxSpec(image="img", run_id="r", case_id="c", deadline_epoch=0, **changes)


def test_defaults_are_hardened():
    args = host_config_args(spec(), {"run": "r"})
    assert args["cap_drop"] == ["ALL"] and args["cap_add"] is None
    assert args["security_opt"] == ["no-new-privileges"]
    assert args["read_only"] is True and args["init"] is True
    assert args["network_mode"] == "none" and args["runtime"] is None
    assert no_network(spec())
    assert args["pids_limit"] == 512
    assert args["mem_limit"] == args["memswap_limit"] == 2 * 1024 * MiB
    # One CPU's worth in every 500 ms window (Docker's --cpus would make it 100 ms windows).
    assert (args["cpu_period"], args["cpu_quota"]) == (500_000, 500_000) and "nano_cpus" not in args
    assert args["tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={256 * MiB},mode=1777"}
    # Anonymous tmpfs volumes, labelled as the sandbox: made with its container, removed with it.
    assert {(m["Target"], m["Source"], m["Type"], m["VolumeOptions"]["NoCopy"],
             m["VolumeOptions"]["Labels"]["run"], m["VolumeOptions"]["DriverConfig"]["Options"]["type"])
            for m in args["mounts"]} == {
        ("/workspace", None, "volume", True, "r", "tmpfs"),
        ("/home/agent", None, "volume", True, "r", "tmpfs"),
    }
    sizes = {m["Target"]: m["VolumeOptions"]["DriverConfig"]["Options"]["o"] for m in args["mounts"]}
    assert sizes["/workspace"].startswith(f"size={1024 * MiB},uid=1000,gid=1000,")
    assert sizes["/home/agent"].startswith(f"size={256 * MiB},uid=1000,gid=1000,")
    assert args["log_config"].type == "json-file" and args["log_config"].config["max-size"] == "1m"


def test_overrides_and_bind_mounts():
    args = host_config_args(
        spec(
            limits=Limits(cpus=0.5, memory_bytes=256 * MiB, pids=64, tmp_bytes=MiB),
            hardening=Hardening(cap_add=("NET_BIND_SERVICE",), no_new_privileges=False, runtime="runsc-nonet"),
            mounts=(BindMount(Path("/run/gw"), "/run/gateway"), BindMount(Path("/data"), "/data", read_only=False)),
        ),
        {},
    )
    assert args["cap_add"] == ["NET_BIND_SERVICE"] and args["security_opt"] is None
    assert args["runtime"] == "runsc-nonet"
    assert (args["cpu_quota"], args["pids_limit"], args["mem_limit"]) == (250_000, 64, 256 * MiB)
    assert [(m["Source"], m["Target"], m["ReadOnly"]) for m in args["mounts"] if m["Type"] == "bind"] == [
        ("/run/gw", "/run/gateway", True),
        ("/data", "/data", False),
    ]


def test_the_cpu_quota_is_a_share_of_each_window_and_never_below_dockers_minimum():
    assert [cpu_quota_us(c) for c in (2, 1, 0.25, 0.001)] == [1_000_000, 500_000, 125_000, 1000]


def test_tmpfs_volumes_are_capped_and_owned_by_the_sandbox_user():
    assert tmpfs_volume_options(64 * MiB, 1000, 1001) == {
        "type": "tmpfs",
        "device": "tmpfs",
        "o": f"size={64 * MiB},uid=1000,gid=1001,mode=0755,nosuid,nodev",
    }


@pytest.mark.parametrize("user", ["agent", "1000:agent", "", "-1"])
def test_non_numeric_users_are_refused(user):
    with pytest.raises(ValueError):
        Hardening(user=user)


def test_uid_gid():
    assert (Hardening(user="1234").uid, Hardening(user="1234").gid) == (1234, 1234)
    assert (Hardening(user="1:2").uid, Hardening(user="1:2").gid) == (1, 2)


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="pids"):
        Limits(pids=0)


def test_registry_builds_docker_lazily_and_names_the_choices_on_a_typo():
    assert registry.backend_names() == ["docker", "kubernetes"]
    assert isinstance(registry.get_backend("docker", client=object()), DockerBackend)
    with pytest.raises(ConfigError) as err:
        registry.get_backend("dokcer")
    assert "sandbox.backend" in str(err.value) and "docker" in err.value.fix


def test_registering_a_backend(monkeypatch):
    monkeypatch.setattr(registry, "_registered", {})
    sentinel = object()
    registry.register_backend("fake", lambda **kw: sentinel)  # type: ignore[arg-type,return-value]
    assert registry.get_backend("fake") is sentinel
    assert registry.backend_names() == ["docker", "fake", "kubernetes"]
    with pytest.raises(ValueError):
        registry.register_backend("docker", lambda **kw: sentinel)  # type: ignore[arg-type,return-value]


def test_an_unreachable_daemon_is_one_clear_user_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    backend = DockerBackend()  # constructing talks to nothing
    with pytest.raises(DockerUnavailableError) as err:
        backend.gc()
    assert "cannot reach the Docker daemon" in err.value.message
    assert "DOCKER_HOST" in err.value.fix and "\n" not in str(err.value)


class _Daemon:
    """Just the `docker info` of a daemon (the one call `runs_on_host_kernel` makes)."""

    def __init__(self, default_runtime: str) -> None:
        self.calls = 0
        self.api = self
        self._default = default_runtime

    def info(self) -> dict:
        self.calls += 1
        return {"DefaultRuntime": self._default, "Runtimes": {"runc": {}, "crun": {}, "runsc-nonet": {}}}


@pytest.mark.parametrize(("default", "runtime", "host_kernel"), [
    ("runc", None, True), ("runc", "runc", True), ("runc", "crun", True), ("runc", "runsc-nonet", False),
    # Found by the second red team: a daemon whose default runtime is gVisor, sandbox.runtime unset.
    ("runsc", None, False), ("runsc", "runc", True), ("runsc", "crun", True),
    # A daemon that defaults to crun gets the host kernel's paths, not gVisor's slower ones.
    ("crun", None, True), ("crun", "runsc-nonet", False),
])
def test_the_host_kernel_is_the_sandboxes_runtime_or_the_daemons_default(default: str, runtime: str | None,
                                                                         host_kernel: bool):
    daemon = _Daemon(default)
    backend = DockerBackend(client=daemon)  # type: ignore[arg-type]
    hardened = spec(hardening=Hardening(runtime=runtime)) if runtime else spec()
    assert backend.runs_on_host_kernel(hardened) is host_kernel
    backend.runs_on_host_kernel(hardened)
    assert daemon.calls <= 1  # asked once, at most


class _DaemonWithoutCrun(_Daemon):
    def info(self) -> dict:
        return {"DefaultRuntime": "runc", "Runtimes": {"runc": {}}}


@pytest.mark.parametrize(("runtime", "script"), [("crun", "scripts/install-crun.sh"),
                                                 ("runsc-nonet", "scripts/install-gvisor.sh")])
def test_an_unregistered_runtime_says_which_script_registers_it(runtime: str, script: str):
    backend = DockerBackend(client=_DaemonWithoutCrun("runc"))  # type: ignore[arg-type]
    with pytest.raises(RuntimeNotRegisteredError) as err:
        backend.check_runtime(runtime)
    assert f"{runtime!r} is not registered" in err.value.message and "(registered: runc)" in err.value.message
    assert script in err.value.fix and err.value.fix.endswith("or unset sandbox.runtime")
