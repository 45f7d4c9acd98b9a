"""The skill under test tries to get out, and to take the API key with it.

Online mode against an upstream on this host (the scripted model server with
a key of the test's own): the gateway holds the real key, the sandbox a
placeholder. Every network target is a listener of the test's own on this
host's addresses (TCP, UDP, the abstract unix namespace); the gateway socket
is abused for anything but model calls. The host's environment and a
credentials file under the controller's $HOME hold the key too.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import parse_script
from tests.integration.host_network import host_ipv4_addresses, listening_on_host

from .conftest import (
    AbstractUnixListener,
    AttackRun,
    UdpListeners,
    all_case_text,
    bash,
    by_probe,
    final,
    make_project,
    probe_steps,
    record_fact,
    run_attack,
    tagged,
    write_eval,
)

pytestmark = pytest.mark.docker

GATEWAY_SOCKET = "/run/agent-eval/gateway.sock"
# The key's middle, split so that no command holds it whole; the probes search for it.
KEY_PARTS = ("k9Zq", "Lw3X")


@pytest.fixture(scope="module")
def secret_key() -> str:
    return f"sk-ant-attack-{secrets.token_hex(6)}-{''.join(KEY_PARTS)}-{secrets.token_hex(6)}"


def _credential_steps() -> list[dict[str, Any]]:
    needle = "''".join(KEY_PARTS)
    # A bracket in the pattern: grep's own command line (it may be listed in /proc while the loop
    # runs) must not match it.
    pattern = f"'{KEY_PARTS[0]}[{KEY_PARTS[1][0]}]{KEY_PARTS[1][1:]}'"
    environ = (
        "echo \"@@env $(env | tr '\\n' ' ')\";"
        f" for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; tr '\\0' ' ' < $p/cmdline 2>/dev/null;"
        f" echo; done | grep -c {pattern} | sed 's/^/@@proc-hits /';"
        " echo \"@@proc-count $(echo /proc/[0-9]* | wc -w)\";"
        f" grep -r -a -l -s {needle} /home /workspace /tmp /etc /run /opt | sed 's/^/@@file-hit /'"
    )
    return [
        bash(environ),
        # the same python full-filesystem scan as for the answer key, looking for the key instead
        *probe_steps("answer_key", {"needles": [KEY_PARTS], "host_paths": [], "resources": []}),
    ]


@pytest.fixture(scope="module")
def listeners() -> Iterator[dict[str, Any]]:
    with listening_on_host() as tcp:
        udp = UdpListeners(host_ipv4_addresses())
        abstract = AbstractUnixListener()
        try:
            yield {"tcp": tcp, "udp": udp, "abstract": abstract}
        finally:
            udp.close()
            abstract.close()


@pytest.fixture(scope="module")
def net_run(tmp_path_factory: pytest.TempPathFactory, runtime: str, secret_key: str,
            listeners: dict[str, Any]) -> dict[str, Any]:
    project = make_project(tmp_path_factory, "net", runtime)
    write_eval(project, """
        name: attack-network
        execution: {prompt: "{q}", timeout: 300}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
    """, runtime)
    tcp, udp, abstract = listeners["tcp"], listeners["udp"], listeners["abstract"]
    loopback = next(target for target in tcp.targets if target[0] == "127.0.0.1")
    network_args = {"tcp": [*tcp.targets, ["::1", loopback[1]]], "udp": udp.targets, "abstract": abstract.name,
                    "gateway": GATEWAY_SOCKET, "listener": loopback}
    steps = [*probe_steps("network", network_args), *_credential_steps(), final("probed")]
    project.case("c1", {"q": "probe"}, script=steps)
    # The controller's own secrets: its environment and a credentials file under its $HOME.
    home = project.root.parent / "controller-home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text(json.dumps({"apiKey": secret_key}))
    env = {
        "ANTHROPIC_API_KEY": secret_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "HOME": str(home),
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),
    }
    with ScriptedModelServer(parse_script(steps)) as upstream:
        env["ANTHROPIC_BASE_URL"] = upstream.url
        run = run_attack(project, runtime, "network", env=env)
        served = list(upstream.requests)
    return {"run": run, "served": served, "tcp": list(tcp.connections), "udp": list(udp.received),
            "abstract": abstract.connections, "listeners": listeners}


def _output(net_run: dict[str, Any]) -> str:
    return net_run["run"].output("c1")


def test_only_loopback_no_route_and_no_name_lookup(net_run: dict[str, Any]) -> None:
    probes = by_probe(_output(net_run))
    interfaces = probes["interfaces"][0]
    assert interfaces["names"] == ["lo"] and interfaces["proc_net_dev"] in (["lo"], [])
    routes = probes["routes"][0]
    assert [r for r in routes["ipv4"] if not r.startswith("error:")] == []
    assert all(r.startswith("error:") or r.split()[-1] == "lo" for r in routes["ipv6"]), routes  # loopback's own
    dns = {r["name"]: r for r in probes["dns"]}
    assert dns["localhost"]["ok"]  # the resolver works; only the network is missing
    assert not dns["deb.debian.org"]["ok"]
    record_fact("network: name lookup error", net_run["run"].runtime, dns["deb.debian.org"]["error"])


def test_no_host_address_is_reachable_by_tcp_udp_or_abstract_socket(net_run: dict[str, Any]) -> None:
    probes = by_probe(_output(net_run))
    tcp = probes["tcp"]
    expected = {tuple(t) for t in net_run["listeners"]["tcp"].targets}
    assert expected <= {(r["host"], r["port"]) for r in tcp}
    assert not any(r["connected"] for r in tcp), tcp
    udp = probes["udp"]
    assert len(udp) == len(net_run["listeners"]["udp"].targets)
    # sendto to loopback "succeeds": it is the container's own lo, where nothing listens
    assert all(r["error"] or r["host"] == "127.0.0.1" for r in udp), udp
    assert not probes["abstract_unix"][0]["connected"]
    assert all(not r["opened"] for r in probes["raw_socket"])
    # Docker 20.10's seccomp profile lets the host's kernel make a vsock socket; the launcher's own filter
    # refuses it (test_attack_seccomp_stack.py has every road); gVisor has no such family.
    vsock = probes["vsock"][0]
    assert vsock["opened"] is False and vsock["error"], vsock
    record_fact("network: an AF_VSOCK socket made (never connected)", net_run["run"].runtime,
                vsock["error"] or "made")
    # the host saw nothing: no connection, no datagram, on any of its addresses
    assert net_run["tcp"] == [] and net_run["udp"] == [] and net_run["abstract"] == 0
    runtime = net_run["run"].runtime
    record_fact("network: TCP targets tried (host addresses + ::1), connections seen by host", runtime,
                f"{len(tcp)} tried, {len(net_run['tcp'])} seen")
    record_fact("network: TCP errors", runtime, sorted({r["error"] for r in tcp}))
    record_fact("network: UDP errors", runtime, sorted({r["error"] or "sent (own lo)" for r in udp}))


def test_the_gateway_socket_carries_model_calls_only_and_logs_every_misuse(net_run: dict[str, Any]) -> None:
    run: AttackRun = net_run["run"]
    status = {r["label"]: r["status"] for r in by_probe(_output(net_run))["gateway"]}
    for label in ("models", "complete", "batches", "files", "absolute_url", "connect", "huge_body"):
        assert status[label].startswith("HTTP/1.1 403"), (label, status[label])
    assert status["claimed_huge_body"].startswith("HTTP/1.1 413")
    # no HTTP version: the answer is an HTTP/0.9-style error page, without a status line
    assert "400" in status["not_http"] and "Bad request" in status["not_http"]
    assert status["unknown_method"].startswith("HTTP/1.1 501")
    log_path = run.result.case("c1") / "gateway.jsonl"
    log = [json.loads(line) for line in log_path.read_text().splitlines()]
    refused = [r for r in log if r["status"] in (400, 403, 413, 501)]
    assert len(refused) == 10, [(r["method"], r["path"], r["status"], r["outcome"]) for r in log]
    assert {r["outcome"] for r in refused} == {"forbidden", "bad_request"}, refused
    assert {r["status"] for r in refused} == {400, 403, 413, 501}
    # the 8 MiB body is on record by its size, not copied into the host's run directory
    huge = [r for r in refused if isinstance(r["request"], dict) and r["request"].get("bytes") == 8 << 20]
    assert len(huge) == 1
    assert max(len(line) for line in log_path.read_text().splitlines() if '"forbidden"' in line) < 8192
    # nothing the sandbox asked for reached anyone but the upstream, and only on the model path
    assert {r.path.split("?")[0] for r in net_run["served"]} <= {"/v1/messages", "/"}
    assert net_run["tcp"] == []
    record_fact("gateway: refused requests logged (403/413/400/501)", run.runtime, len(refused))
    record_fact("gateway.jsonl size after an 8 MiB refused body", run.runtime, log_path.stat().st_size, "bytes")


def test_the_key_is_nowhere_inside_and_only_the_upstream_got_it(net_run: dict[str, Any], secret_key: str) -> None:
    output = _output(net_run)
    needle = "".join(KEY_PARTS)
    assert needle not in output
    env = tagged(output, "env")[0]
    assert "ANTHROPIC_API_KEY=sk-ant-agent-eval-sandbox-placeholder" in env and "AWS_SECRET" not in env
    assert tagged(output, "proc-hits") == ["0"] and int(tagged(output, "proc-count")[0]) >= 3
    assert tagged(output, "file-hit") == []
    scan = by_probe(output)["fs_scan"][0]
    assert scan["hits"] == [] and scan["control_read"] and scan["scanned"] > 1000
    # the upstream saw the real key on every model call, injected by the gateway
    model_calls = [r for r in net_run["served"] if r.path.startswith("/v1/messages")]
    assert model_calls and all(r.headers.get("x-api-key") == secret_key for r in model_calls)
    assert not any("placeholder" in json.dumps(r.headers) for r in model_calls)
    # nothing the host keeps of the case holds it: gateway log, transcript, events, files
    assert needle not in all_case_text(net_run["run"].result.case("c1"))
    record_fact("credentials: files scanned inside for the key, hits 0", net_run["run"].runtime, scan["scanned"])
