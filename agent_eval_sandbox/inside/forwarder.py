"""TCP -> unix-socket forwarder, run inside the sandbox container.

The container has no network; the host's model gateway is a unix socket
bind-mounted into it (or, in a Kubernetes Pod, reached through the
controller's relay: see controller_link.py). The CLI speaks HTTP over TCP, so this pipes each
connection to 127.0.0.1:PORT byte for byte to the socket. It knows nothing
of HTTP: whatever it carries, the gateway decides.

Standard library only (the image's python3); started by the in-container
launcher:

    python3 /opt/agent-eval/forwarder.py --listen 127.0.0.1:8080 \
        --unix /run/agent-eval/gateway.sock [--ready-file /tmp/forwarder.ready]

Ready when it prints `listening on HOST:PORT` to stderr (and writes HOST:PORT
to the ready file, if one is given).

Nothing one connection does ends the accept loop (a client gone before it was
accepted, no thread to spare): the forwarder serves the whole session, and a
connection it drops is only that one. A gateway socket that refuses a
connection for a moment (not there yet, its backlog full while the host is
busy) is tried again for `CONNECT_PATIENCE_S` before the client is let go:
closing the client would reach the CLI as ECONNRESET, which it retries only
twice before it ends the case.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import sys
import threading
import time

TYPE_CHECKING = False  # not typing's: the launcher that imports this starts on its case's CPU
if TYPE_CHECKING:
    from collections.abc import Callable

# -I leaves this file's directory off sys.path; controller_link.py lives next to it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import controller_link  # noqa: E402

CHUNK_BYTES = 65536
# How long a connection waits for the gateway socket to take it, and the first pause between tries.
CONNECT_PATIENCE_S = 15.0
FIRST_RETRY_S = 0.02
# The longest one try through the relay may take: a try that hangs (a SYN dropped while a Pod's network is
# coming up, a relay slow to answer under load) is given up and made again, within the patience.
RELAY_TRY_S = 5.0
# What a connect answers while the server is not (yet) taking connections: a unix socket not there or its
# backlog full; through the relay (TCP), also a Pod network not routed yet or a connection reset under load.
TRANSIENT = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT,
                       errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNRESET})


def transient(exc: OSError) -> bool:
    # A socket's own timeout is a TimeoutError with no errno: errno.ETIMEDOUT alone never matched it.
    return isinstance(exc, TimeoutError) or exc.errno in TRANSIENT


def connect_unix(unix_path: str, patience_s: float = CONNECT_PATIENCE_S) -> socket.socket:
    """A connection to `unix_path`, tried again on transient refusals for up to `patience_s`."""
    deadline = time.monotonic() + patience_s
    pause = FIRST_RETRY_S
    while True:
        try_s = max(min(RELAY_TRY_S, deadline - time.monotonic()), FIRST_RETRY_S)
        try:
            # Directly (blocking: a full backlog is waited out), or through the relay, one bounded try at a time.
            upstream: socket.socket = controller_link.connect(unix_path, relay_dial_timeout=try_s)
            return upstream
        except OSError as exc:
            if not transient(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until EOF or error, then pass the EOF on (half-close), so a
    request/response in the other direction can still finish."""
    try:
        while True:
            data = source.recv(CHUNK_BYTES)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _bridge(client: socket.socket, unix_path: str) -> None:
    try:
        upstream = connect_unix(unix_path)
    except OSError as exc:
        print(f"forwarder: cannot connect to {unix_path}: {exc}", file=sys.stderr, flush=True)
        client.close()
        return
    with client, upstream:
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen must be HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def forward(listen: tuple[str, int], unix_path: str, ready_file: str | None = None, *, announce: bool = True,
            on_ready: Callable[[], None] | None = None) -> None:
    """Accept on `listen` forever, bridging each connection to `unix_path`.

    `announce=False` keeps the ready line off stderr (the in-container launcher
    shares its stderr with the agent's log and is told by `on_ready` instead).
    """
    server = socket.create_server(listen, backlog=128)
    host, port = server.getsockname()[:2]
    if ready_file:
        # Written whole, then renamed: a waiter never reads half a line.
        partial = f"{ready_file}.tmp"
        with open(partial, "w") as handle:
            handle.write(f"{host}:{port}\n")
        os.replace(partial, ready_file)
    if on_ready is not None:
        on_ready()
    if announce:
        print(f"forwarder: listening on {host}:{port} -> {unix_path}", file=sys.stderr, flush=True)
    while True:
        try:
            client, _ = server.accept()
        except OSError as exc:
            # Out of descriptors or similar: back off instead of dying; the
            # agent's next connection may succeed.
            print(f"forwarder: accept failed: {exc}", file=sys.stderr, flush=True)
            time.sleep(0.1)
            continue
        try:
            # Streams are many small SSE events: send each at once.
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_bridge, args=(client, unix_path), daemon=True).start()
        except Exception as exc:  # noqa: BLE001 - one connection's trouble (a reset client, no thread) is its own
            print(f"forwarder: dropped a connection: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            client.close()


def main(argv: list[str] | None = None) -> int:
    import argparse  # only when run on its own: the launcher that imports this module never needs it

    parser = argparse.ArgumentParser(description="Forward TCP connections to a unix socket.")
    parser.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0 picks one)")
    parser.add_argument("--unix", required=True, help="the unix socket to forward to")
    parser.add_argument("--ready-file", help="write HOST:PORT here once listening")
    args = parser.parse_args(argv)
    try:
        listen = parse_listen(args.listen)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        forward(listen, args.unix, args.ready_file)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"forwarder: cannot listen on {args.listen}: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
