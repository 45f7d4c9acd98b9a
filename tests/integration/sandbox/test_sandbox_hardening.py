"""The hardening is in effect: as Docker reports it, and as a process inside meets it."""

from __future__ import annotations

import json

import pytest

from agent_eval_sandbox.errors import RuntimeNotRegisteredError
from agent_eval_sandbox.sandbox import labels as L
from agent_eval_sandbox.sandbox.base import Hardening, Limits, SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import READONLY_PATHS
from tests.docker_objects import objects_of_run
from tests.integration.cgroup_writes import CGROUP_WRITES

pytestmark = pytest.mark.docker

MiB = 1024 * 1024
SMALL = Limits(
    cpus=0.5, memory_bytes=256 * MiB, pids=128, workspace_bytes=8 * MiB, tmp_bytes=4 * MiB, home_bytes=4 * MiB
)


def mounts_of(info):
    return {m["Destination"]: m for m in info["Mounts"]}


def test_docker_reports_the_hardened_configuration(make_sandbox, backend, run_id):
    sandbox = make_sandbox("inspect", limits=SMALL)
    api = backend.client.api
    info = api.inspect_container(sandbox.container_id)
    host = info["HostConfig"]
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["ReadonlyRootfs"] is True
    assert host["Init"] is True
    assert host["NetworkMode"] == "none"
    # Not even Docker's "none" network: no libnetwork endpoint, a namespace with loopback only.
    assert info["Config"]["NetworkDisabled"] is True and not info["NetworkSettings"]["Networks"]
    assert host["PidsLimit"] == 128
    assert host["Memory"] == host["MemorySwap"] == 256 * MiB
    assert (host["CpuPeriod"], host["CpuQuota"], host["NanoCpus"]) == (500_000, 250_000, 0)
    assert host["Tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={4 * MiB},mode=1777"}
    assert host["ReadonlyPaths"] == list(READONLY_PATHS)
    # The main process is nobody's: the agent (1000) cannot signal the process that ties the
    # sandbox's life to its controller's. Every command runs as the sandbox user.
    assert info["Config"]["User"] == "65534:65534"
    # It waits for the end of a stdin held by the controller only (the lifeline), closed as it lets go.
    assert info["Config"]["Cmd"] == ["head", "-c", "1"]
    assert (info["Config"]["OpenStdin"], info["Config"]["StdinOnce"], info["Config"]["Tty"]) == (True, True, False)
    assert info["State"]["Running"] is True
    assert mounts_of(info)["/etc/hosts"]["RW"] is False

    labels = info["Config"]["Labels"]
    assert labels[L.MANAGED] == "1" and labels[L.RUN_ID] == run_id and labels[L.CASE_ID] == "inspect"
    assert labels[L.OWNER] == L.current_owner().label()
    assert int(labels[L.DEADLINE]) > 0

    mounts = mounts_of(info)
    assert mounts["/workspace"]["Type"] == mounts["/home/agent"]["Type"] == "volume"
    for target, size in (("/workspace", 8 * MiB), ("/home/agent", 4 * MiB)):
        volume = api.inspect_volume(mounts[target]["Name"])
        assert volume["Options"]["type"] == "tmpfs"
        assert f"size={size}" in volume["Options"]["o"]
        assert volume["Labels"][L.RUN_ID] == run_id and volume["Labels"][L.OWNER] == labels[L.OWNER]


def test_the_read_only_paths_keep_every_one_of_the_daemons_defaults(backend, sandbox_image, run_id):
    """A container's ReadonlyPaths replaces the daemon's list: ours must hold all of this daemon's."""
    api = backend.client.api
    plain = api.create_container(sandbox_image, command=["true"], labels={L.MANAGED: "1", L.RUN_ID: run_id})["Id"]
    try:
        defaults = api.inspect_container(plain)["HostConfig"]["ReadonlyPaths"]
    finally:
        api.remove_container(plain, force=True)
    assert defaults and set(defaults) <= set(READONLY_PATHS), defaults


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_the_cgroup_hierarchies_are_read_only_even_to_root(make_sandbox, runtime):
    # crun on a cgroup v1 host mounts their tmpfs with mode 1777 (found by the attack suite's first
    # run under crun); made read-only as a whole, crun left each hierarchy under it writable, and a
    # sandbox user 0 raised its own limits (found by the red team, eleventh round).
    sandbox = make_sandbox(f"cgroup-{runtime}", limits=SMALL, hardening=Hardening(runtime=runtime))
    for user in ("1000:1000", "0:0"):
        seen = json.loads(sandbox.exec(["python3", "-c", CGROUP_WRITES], user=user).stdout)
        assert len(seen["points"]) > 1 and seen["writable"] == [], (user, seen)
        assert "pids/pids.max" in seen["written"] or "pids.max" in seen["written"], seen  # some limit was tried
        assert set(seen["written"].values()) == {"Read-only file system"}, (user, seen)
    # ...and the limits, read where the counters come from, are the sandbox's still.
    assert sandbox.exec(["cat", "/sys/fs/cgroup/pids/pids.max"]).stdout == b"128\n"
    assert sandbox.exec(["cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]).stdout == b"%d\n" % (256 * MiB)


def test_the_agent_user_is_unprivileged_offline_and_read_only(make_sandbox):
    sandbox = make_sandbox("agent", limits=SMALL)

    def run(*cmd: str):
        return sandbox.exec(list(cmd))

    assert run("id", "-u").stdout == b"1000\n"
    status = run("cat", "/proc/self/status").stdout.decode()
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status

    touch = run("touch", "/usr/evil")
    assert touch.exit_code != 0 and b"Read-only file system" in touch.stderr

    setuid = run("python3", "-c", "import os; os.setuid(0)")
    assert setuid.exit_code == 1 and b"PermissionError" in setuid.stderr

    interfaces = [line.split(":")[0].strip() for line in run("cat", "/proc/net/dev").stdout.decode().splitlines()[2:]]
    assert interfaces == ["lo"]
    connect = run(
        "python3",
        "-c",
        "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)",
    )
    assert connect.exit_code == 1 and b"Network is unreachable" in connect.stderr
    # With no network of Docker's, the loopback names still resolve, and no one inside can add one.
    loopback = run("python3", "-c", "import socket; s = socket.create_server(('localhost', 0)); "
                   "socket.create_connection(('localhost', s.getsockname()[1])); print(s.getsockname()[0])")
    assert loopback.stdout == b"127.0.0.1\n", loopback.stderr
    hosts = run("sh", "-c", "echo '127.0.0.1 api.anthropic.com' >> /etc/hosts")
    assert hosts.exit_code != 0 and b"Permission denied" in hosts.stderr

    version = run("claude", "--version")
    assert version.ok and b"(Claude Code)" in version.stdout


def test_even_root_inside_has_no_capabilities(make_sandbox):
    sandbox = make_sandbox("root", limits=SMALL)

    def as_root(*cmd: str):
        return sandbox.exec(list(cmd), user="0:0")

    assert as_root("id", "-u").stdout == b"0\n"
    assert "CapEff:\t0000000000000000" in as_root("cat", "/proc/self/status").stdout.decode()
    assert as_root("touch", "/tmp/f").ok
    chown = as_root("chown", "1234", "/tmp/f")  # needs CAP_CHOWN
    assert chown.exit_code != 0 and b"Operation not permitted" in chown.stderr
    raw = as_root("python3", "-c", "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)")  # CAP_NET_RAW
    assert raw.exit_code == 1 and b"PermissionError" in raw.stderr
    write_root = as_root("sh", "-c", "echo x > /evil")
    assert write_root.exit_code != 0 and b"Read-only file system" in write_root.stderr
    hosts = as_root("sh", "-c", "echo '127.0.0.1 api.anthropic.com' >> /etc/hosts")
    assert hosts.exit_code != 0 and b"Read-only file system" in hosts.stderr
    setuid = as_root("python3", "-c", "import os; os.setuid(1000)")  # needs CAP_SETUID, even downwards
    assert setuid.exit_code == 1 and b"PermissionError" in setuid.stderr


@pytest.mark.parametrize(("path", "cap_mib"), [("/workspace", 8), ("/tmp", 4), ("/home/agent", 4)])
def test_writable_places_are_size_capped(make_sandbox, path, cap_mib):
    sandbox = make_sandbox("disk", limits=SMALL)
    fill = sandbox.exec(["sh", "-c", f"head -c {(cap_mib + 1) * MiB} /dev/zero > {path}/big"])
    assert fill.exit_code != 0 and b"No space left on device" in fill.stderr
    size = sandbox.exec(["stat", "-c", "%s", f"{path}/big"])
    assert int(size.stdout) <= cap_mib * MiB
    assert sandbox.exec(["true"]).ok  # full disk, working sandbox


# Two busy processes for 2 s each; it prints the CPU time each got, then the wall time of both.
CPU_HOG = """
import os, time
def burn():
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        pass
started, cpu = time.monotonic(), time.process_time()
if os.fork() == 0:
    burn()
    print(time.process_time(), flush=True)  # a child's CPU time starts at its fork
    os._exit(0)
burn()
os.wait()
print(time.process_time() - cpu, time.monotonic() - started, flush=True)
"""


def test_the_cpu_limit_holds_over_each_window(make_sandbox):
    sandbox = make_sandbox("cpu", limits=SMALL)  # 0.5 CPU: 250 ms in each 500 ms window
    hog = sandbox.exec(["python3", "-c", CPU_HOG])
    assert hog.ok, hog.stderr
    child, parent, wall = (float(word) for word in hog.stdout.decode().split())
    # Unlimited, two busy processes on two or more cores get ~4 s. Limited, they get at most the
    # quota of each window their wall time touched: 0.5 CPU of it, plus one window's 250 ms, plus
    # the scheduler's slack (it hands out quota in 5 ms slices per core).
    assert 0.3 < child + parent <= 0.5 * wall + 0.25 + 0.1, (child, parent, wall)


def test_more_cpus_than_the_host_has_is_the_host_not_a_failed_sandbox(make_sandbox):
    # `--cpus 64` would make Docker refuse the container on a smaller machine; an eval written on a
    # big one runs on a laptop, with what the laptop has.
    sandbox = make_sandbox("many-cpus", limits=Limits(cpus=64))
    assert sandbox.exec(["true"]).ok


def test_the_image_is_what_the_design_says(backend, sandbox_image, make_sandbox):
    config = backend.client.api.inspect_image(sandbox_image)["Config"]
    env = dict(item.split("=", 1) for item in config["Env"])
    for switch in (
        "DISABLE_AUTOUPDATER",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
    ):
        assert env[switch] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "2" and env["HOME"] == "/home/agent"
    assert config["User"] == "1000:1000" and config["WorkingDir"] == "/workspace"
    assert config["Cmd"] == ["sleep", "infinity"]
    assert config["Labels"]["agent-eval-sandbox.claude-version"] == "2.1.332"

    sandbox = make_sandbox("image", limits=SMALL)
    owners = sandbox.exec(
        ["stat", "-c", "%U %a %n", "/usr/local/bin/claude", "/usr/bin/python3-agent-eval", "/opt/agent-eval"]
    ).stdout.decode()
    # Execute-only (runc image), to root inside as well (it owns them, without CAP_DAC_OVERRIDE): the
    # CLI, the launcher, the hook client and the tool's own commands run non-dumpable.
    assert owners.splitlines() == [
        "root 111 /usr/local/bin/claude",
        "root 111 /usr/bin/python3-agent-eval",
        "root 755 /opt/agent-eval",
    ]
    for user in ("1000:1000", "0:0"):
        read = sandbox.exec(["sh", "-c", "head -c 4 /usr/bin/python3-agent-eval /usr/local/bin/claude"], user=user)
        assert not read.ok and read.stdout == b"" and b"Permission denied" in read.stderr, (user, read)
    assert not sandbox.exec(["sh", "-c", "touch /opt/agent-eval/x"]).ok
    tools = sandbox.exec(["sh", "-c", "for t in python3 git ps; do command -v $t || exit 1; done; getent passwd agent"])
    assert tools.ok and tools.stdout.decode().splitlines() == [
        "/usr/bin/python3",
        "/usr/bin/git",
        "/usr/bin/ps",
        "agent:x:1000:1000::/home/agent:/bin/bash",
    ]
    # Every in-container script (whatever inside/ holds) is root-owned and read-only for the agent.
    modes = sandbox.exec(["sh", "-c", "find /opt/agent-eval -printf '%y %u %m\\n' | sort -u"]).stdout.decode()
    assert set(modes.splitlines()) <= {"d root 755", "f root 644"} and "d root 755" in modes


def test_an_unregistered_runtime_is_refused_before_anything_is_created(backend, sandbox_image, run_id):
    spec = SandboxSpec(
        image=sandbox_image,
        run_id=run_id,
        case_id="rt",
        deadline_epoch=0,
        hardening=Hardening(runtime="no-such-runtime"),
    )
    with pytest.raises(RuntimeNotRegisteredError) as err:
        backend.create(spec)
    assert "'no-such-runtime'" in err.value.message and "runc" in err.value.message
    assert objects_of_run(run_id) == []
