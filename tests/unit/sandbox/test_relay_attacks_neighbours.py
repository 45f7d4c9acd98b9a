# ruff: noqa: F811  (the world/sock_root fixtures are imported from test_relay_attacks)
"""The Kubernetes relay attacked from one case Pod while its neighbour works (an outside red team's).

Reuses the two-case world of test_relay_attacks.py (real Relay, real gateway
channels and brokers, the in-Pod `controller_link`). Each test asserts the
promise and FAILS when the attack succeeds:
- a case cannot exhaust the relay for its neighbour (connections without a
  token, slow preambles, connections holding its own token);
- a case reaches only its own channel whatever it puts in the preamble.

Each Pod has an address of its own: the attacking case connects from 127.0.0.2, its
neighbour from 127.0.0.1. (Token-less connections once counted against the relay's one
cap for all cases: 520 of them locked the neighbour out. Now one address holds at most
`MAX_PER_PEER`.)
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from agent_eval_sandbox.inside import controller_link, paths
from agent_eval_sandbox.sandbox import relay as relay_module

from .test_relay_attacks import BODY, SECRET, pod_dir, post, sock_root, world  # noqa: F401  (fixtures)

ATTACKER = "127.0.0.2"  # the attacking Pod's address


def _open_idle(port: int, count: int, first: bytes = b"") -> list[socket.socket]:
    held = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(ATTACKER, 0))
        except OSError:
            break
        if first:
            sock.sendall(first)
        held.append(sock)
    return held


def _neighbour_call(sock_root, relay, token) -> tuple[bool, str]:
    """What the neighbour's in-Pod forwarder gets: (worked, detail)."""
    try:
        sock = controller_link.connect(str(pod_dir(sock_root, relay, token) / paths.GATEWAY_SOCKET_NAME), 5)
    except OSError as exc:
        return False, f"{type(exc).__name__}: {exc}"
    with sock:
        try:
            status, _ = post(sock)
        except OSError as exc:
            return False, f"{type(exc).__name__}: {exc}"
    return status == 200, f"HTTP {status}"


@pytest.mark.parametrize("how", ["silent", "slow-preamble"])
def test_a_case_without_any_token_cannot_lock_its_neighbour_out_of_the_relay(world, sock_root, how):
    """Case a (it knows the relay's host:port from its relay.json) opens connections and never
    finishes a preamble (or dribbles it); the relay counts them against its global cap, so case
    b's forwarder is refused. Repeated every 10 s (the preamble timeout), it lasts the whole run."""
    relay, upstream, cases = world
    first = b"" if how == "silent" else b"agent-eval-relay/1 "
    held = _open_idle(relay.port, relay_module.MAX_CONNECTIONS + 8, first)
    try:
        time.sleep(0.5)  # let the relay admit them
        worked, detail = _neighbour_call(sock_root, relay, cases["b"].token)
    finally:
        for sock in held:
            sock.close()
    assert worked, (f"case a held {len(held)} token-less connections; case b's call through the relay: {detail}; "
                    f"relay refusals: {relay.refusal_log[-2:]}")


def test_a_case_cannot_lock_its_neighbour_out_by_refreshing_slow_preambles(world, sock_root):
    """The same, sustained past the 10 s preamble timeout: a loop reopening what the relay timed out."""
    relay, upstream, cases = world
    stop = threading.Event()
    held: list[socket.socket] = []
    lock = threading.Lock()

    def attacker() -> None:
        while not stop.is_set():
            with lock:
                alive = []
                for sock in held:
                    try:
                        sock.setblocking(False)
                        sock.recv(64)  # b"" or b"refused ..." once the relay gave up on it
                        sock.close()
                    except BlockingIOError:
                        alive.append(sock)
                    except OSError:
                        sock.close()
                held[:] = alive
                want = relay_module.MAX_CONNECTIONS + 8 - len(held)
            more = _open_idle(relay.port, want, b"agent-eval-relay/1 ")
            with lock:
                held.extend(more)
            stop.wait(0.5)

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    try:
        time.sleep(relay_module.PREAMBLE_TIMEOUT_S + 3)  # past the first timeouts
        results = [_neighbour_call(sock_root, relay, cases["b"].token) for _ in range(3)]
    finally:
        stop.set()
        thread.join(10)
        with lock:
            for sock in held:
                sock.close()
    assert all(worked for worked, _ in results), results


def test_a_case_holding_its_own_token_connections_cannot_lock_its_neighbour_out(world, sock_root):
    """After `ok` the relay only pipes; the per-case gateway/broker caps (32 + 32) bound what a valid
    token can hold. The neighbour must still get through."""
    relay, upstream, cases = world
    a = cases["a"]
    held = []
    for name in (paths.GATEWAY_SOCKET_NAME, paths.BROKER_SOCKET_NAME):
        for _ in range(40):
            try:
                held.append(controller_link.connect(str(pod_dir(sock_root, relay, a.token) / name), 5))
            except OSError:
                pass
    try:
        worked, detail = _neighbour_call(sock_root, relay, cases["b"].token)
    finally:
        for sock in held:
            sock.close()
    assert worked, detail


@pytest.mark.parametrize("preamble", [
    b"agent-eval-relay/1 {b} gateway.sock\r",        # CRLF
    b"agent-eval-relay/1  {b} gateway.sock",          # two spaces
    b"agent-eval-relay/1 {b}\x00 gateway.sock",       # NUL after the token
    b"agent-eval-relay/1 {b} gateway.sock\x00",       # NUL after the name
    b"agent-eval-relay/1 {b} ./gateway.sock",
    b"agent-eval-relay/1 {b} ../b/gateway.sock",
    b"agent-eval-relay/1 {b} lifeline.sock",
    b"agent-eval-relay/1 {b} prompt.txt",
    b"AGENT-EVAL-RELAY/1 {b} gateway.sock",
    b"agent-eval-relay/1 {a}{b} gateway.sock",        # concatenated tokens
    b"agent-eval-relay/1 {bprefix} gateway.sock",     # a prefix of b's token
    b"agent-eval-relay/1 \xef\xbb\xbf{b} gateway.sock",  # BOM
])
def test_odd_preambles_never_reach_another_case(world, preamble):
    relay, upstream, cases = world
    a, b = cases["a"], cases["b"]
    line = (preamble.replace(b"{a}", a.token.encode()).replace(b"{bprefix}", b.token[:20].encode())
            .replace(b"{b}", b"TOKEN-OF-NOBODY"))
    with socket.create_connection(("127.0.0.1", relay.port), timeout=12) as sock:
        sock.sendall(line + b"\n")
        answer = sock.recv(200)
    assert answer.startswith(b"refused"), (line, answer)
    assert b.gateway_log == [] and a.gateway_log == [] and upstream.requests == []


def test_a_huge_line_or_a_flood_after_ok_stays_in_the_own_channel(world, sock_root):
    """A valid preamble followed in the same packet by a 1 MiB header line: only a's gateway sees it."""
    relay, upstream, cases = world
    a, b = cases["a"], cases["b"]
    with socket.create_connection(("127.0.0.1", relay.port), timeout=20) as sock:
        sock.sendall(b"agent-eval-relay/1 " + a.token.encode() + b" gateway.sock\n"
                     + b"POST /v1/messages HTTP/1.1\r\nx-" + b"A" * (1 << 20) + b": 1\r\n\r\n")
        answer = b""
        try:
            while len(answer) < 4096:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
        except OSError:
            pass
    assert answer.startswith(b"ok\n"), answer[:100]
    assert b.gateway_log == [] and upstream.requests == []
    worked, detail = _neighbour_call(sock_root, relay, b.token)
    assert worked, detail
