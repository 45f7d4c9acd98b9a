"""The lifecycle every host socket service shares (socket_service.py, unix_socket.py), on real sockets."""

from __future__ import annotations

import shutil
import socket
import socketserver
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.cpu_share import CpuShare
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway import Credentials, ScriptedModelServer, parse_script
from agent_eval_sandbox.gateway.gateway import Channel
from agent_eval_sandbox.interception import Broker, CaseContext
from agent_eval_sandbox.interception.handlers import parse_handlers
from agent_eval_sandbox.unix_socket import LOGGED_REFUSED_CONNECTIONS, CappedUnixServer, UnixSocketService


class _HeldHandler(socketserver.BaseRequestHandler):
    """Reads one byte (a connection that sends nothing is idle), then holds the request until released."""

    server: CappedUnixServer[_HeldService]

    def handle(self) -> None:
        service = self.server.service
        service.accepted.set()
        if not self.request.recv(1):
            return
        with service.request_in_flight():
            service.entered.set()
            service.release.wait(10)
            service.events.append("handled")
            self.request.sendall(b"done")


class _HeldService(UnixSocketService):
    handler = _HeldHandler
    what = "the test service"
    thread_name = "test-service"

    def __init__(self, path: Path, *, max_connections: int = 4) -> None:
        super().__init__(path, max_connections=max_connections)
        self.accepted, self.entered, self.release = threading.Event(), threading.Event(), threading.Event()
        self.events: list[str] = []
        self.refusals: list[tuple[int, bool]] = []

    def _stopped(self, server: socketserver.BaseServer) -> None:
        super()._stopped(server)
        self.events.append("stopped")

    def _refuse_connection(self, request: socket.socket, open_connections: int, *, logged: bool) -> None:
        self.refusals.append((open_connections, logged))


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="aes-ss-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(path))
    return sock


def test_start_serves_a_socket_anyone_may_connect_to_and_is_idempotent(sock_dir):
    service = _HeldService(sock_dir / "s.sock")
    assert service.start() is service and service.started
    assert service.start() is service
    assert stat.S_IMODE((sock_dir / "s.sock").stat().st_mode) == 0o666
    assert [t.name for t in threading.enumerate()].count("test-service") == 1
    service.close()


def test_close_waits_for_the_request_in_flight_then_releases_and_removes_the_socket(sock_dir):
    service = _HeldService(sock_dir / "s.sock").start()
    with _connect(service.socket_path) as client:
        client.sendall(b"x")
        assert service.entered.wait(5) and service.in_flight == 1
        closer = threading.Thread(target=service.close)
        closer.start()
        time.sleep(0.3)
        assert service.closed and service.events == []  # still waiting for the request
        service.release.set()
        closer.join(10)
        assert client.recv(4) == b"done"
    assert service.events == ["handled", "stopped"]
    assert not service.socket_path.exists() and service.in_flight == 0


def test_the_wait_for_requests_in_flight_is_bounded_by_the_grace(sock_dir):
    service = _HeldService(sock_dir / "s.sock").start()
    with _connect(service.socket_path) as client:
        client.sendall(b"x")
        assert service.entered.wait(5)
        started = time.monotonic()
        service.close(grace_s=0.2)
        assert time.monotonic() - started < 5
        assert service.events == ["stopped"] and not service.socket_path.exists()
        service.release.set()


def test_close_is_idempotent_and_a_closed_service_does_not_start_again(sock_dir):
    service = _HeldService(sock_dir / "s.sock")
    with service:
        assert service.started
    service.close()
    assert service.events == ["stopped"]
    with pytest.raises(RuntimeError, match="closed"):
        service.start()


def test_close_drops_idle_connections(sock_dir):
    service = _HeldService(sock_dir / "s.sock").start()
    with _connect(service.socket_path) as idle:
        assert service.accepted.wait(5)  # its handler waits for a first byte that never comes
        service.close()
        idle.settimeout(5)
        assert idle.recv(1) == b""


def test_connections_over_the_cap_are_refused_counted_and_only_the_first_few_logged(sock_dir):
    service = _HeldService(sock_dir / "s.sock", max_connections=1).start()
    extra = LOGGED_REFUSED_CONNECTIONS + 2
    socks = [_connect(service.socket_path) for _ in range(1 + extra)]
    deadline = time.monotonic() + 5
    while service.connections_refused < extra and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.connections_refused == extra
    assert [logged for _, logged in service.refusals] == [True] * LOGGED_REFUSED_CONNECTIONS + [False] * 2
    assert {open_connections for open_connections, _ in service.refusals} == {1}
    for sock in socks:
        sock.close()
    service.close()


# ---- a bind that fails is one clear UserError, for every service ------------------------------


def test_a_busy_tcp_port_is_a_user_error_with_a_fix():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = ScriptedModelServer(parse_script([{"text": "x"}]), port=port)
        with pytest.raises(UserError, match=f"the model server cannot listen on 127.0.0.1:{port}") as caught:
            server.start()
    assert caught.value.fix and "--port" in caught.value.fix
    assert not server.started


def _channel(path: Path) -> Channel:
    return Channel("c1", path, 1.0, path.parent / "gateway.jsonl", upstream_url="http://127.0.0.1:9",
                   credentials=Credentials(), client=None)  # type: ignore[arg-type]


def _broker(path: Path) -> Broker:
    handlers = parse_handlers({"handlers": [{"match": "q", "patterns": ["AskUserQuestion"]}]}, "t")
    return Broker("c1", path, handlers, CaseContext(), {}, path.parent / "decisions.jsonl", answerer=None)


@pytest.mark.parametrize(("make", "what"), [(_channel, "the model gateway of case c1"),
                                            (_broker, "the hook broker of case c1")])
def test_a_unix_socket_that_cannot_be_made_is_a_user_error_with_a_fix(sock_dir, make, what):
    (sock_dir / "file").write_text("not a directory")
    path = sock_dir / "file" / "s.sock"
    with pytest.raises(UserError, match=f"{what} cannot listen on {path}") as caught:
        make(path).start()
    assert caught.value.fix == "check that the socket's directory is writable"


def test_a_broker_socket_path_over_the_unix_limit_is_a_user_error(tmp_path):
    # (the gateway's: test_gateway_edges.py)
    with pytest.raises(UserError, match="the hook broker of case c1: the socket path is .* over the 107-byte limit"):
        _broker(tmp_path / ("x" * 120) / "s.sock").start()


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_cases_requests_are_charged_their_cpu_one_at_a_time_and_wait_once_in_debt(sock_dir):
    service = _HeldService(sock_dir / "s.sock")
    share = service.cpu_share = CpuShare(rate=1.0, burst_s=0.05)
    inside, release, order = threading.Event(), threading.Event(), []

    def first() -> None:
        with service.charged():
            inside.set()
            _burn(0.15)  # overdraws: it went in with the share in credit
            release.wait(5)
            order.append("first")

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(5)
    def then() -> None:
        with service.charged():
            order.append("second")

    second = threading.Thread(target=then)
    second.start()
    time.sleep(0.1)
    assert order == []  # held behind the first: arriving together, they cannot overdraw together
    release.set()
    thread.join(5)
    second.join(5)
    assert order == ["first", "second"]
    assert 0.1 < share.charged_s < 0.3, share.charged_s
    assert share.waited_s > 0.05  # the second waited for the first one's debt to be paid


def test_the_gateway_and_the_broker_of_a_case_each_have_a_share(sock_dir):
    channel = Channel("c", sock_dir / "g.sock", 1.0, sock_dir / "log.jsonl", upstream_url="http://127.0.0.1:9",
                      credentials=Credentials(api_key="k"), client=None)  # type: ignore[arg-type]
    broker = Broker("c", sock_dir / "b.sock", parse_handlers({"handlers": []}, "h.yaml"), CaseContext(()), {},
                    sock_dir / "d.jsonl", answerer=None)
    assert isinstance(channel.cpu_share, CpuShare) and isinstance(broker.cpu_share, CpuShare)
