"""How the in-sandbox scripts reach the controller: a unix socket, or the relay over TCP.

Standard library only (the image's python3); imported by forwarder.py and
hook_client.py. On Docker the case's sockets are bind-mounted into the
container and dialled as they are. A Kubernetes Pod has a read-only
`relay.json` beside where the sockets would be, written by the controller:

    {"host": "10.0.0.7", "port": 8470, "token": "…"}

and the socket is reached through the controller's relay: one preamble line
naming the token and the socket, one answer line, then the socket's bytes.
"""

from __future__ import annotations

import json
import os
import socket

RELAY_FILE_NAME = "relay.json"
PROTOCOL = b"agent-eval-relay/1"
MAX_ANSWER_BYTES = 256


class LinkError(OSError):
    """The controller could not be reached, or refused the connection."""


def relay_file(socket_path: str) -> str:
    return os.path.join(os.path.dirname(socket_path), RELAY_FILE_NAME)


def read_relay(socket_path: str) -> dict[str, object] | None:
    """The relay settings for this socket's directory, or None (dial the socket itself)."""
    try:
        with open(relay_file(socket_path), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LinkError(f"unreadable {relay_file(socket_path)}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("host"), str) or not isinstance(data.get("port"), int) \
            or not isinstance(data.get("token"), str):
        raise LinkError(f"{relay_file(socket_path)} is not a relay description")
    return data


def connect(socket_path: str, timeout: float | None = None, relay_dial_timeout: float | None = None) -> socket.socket:
    """A connected socket to `socket_path`'s service, directly or through the relay.

    `timeout` is the connected socket's. Through the relay, `relay_dial_timeout` bounds reaching it and its
    answer (default: `timeout`, or 10 s), so that a caller that tries again can keep to its own patience.
    """
    relay = read_relay(socket_path)
    if relay is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(socket_path)
        except OSError:
            sock.close()
            raise
        return sock
    dial = relay_dial_timeout or timeout or 10.0
    sock = socket.create_connection((str(relay["host"]), int(str(relay["port"]))), timeout=dial)
    try:
        name = os.path.basename(socket_path)
        sock.sendall(b" ".join([PROTOCOL, str(relay["token"]).encode("ascii"), name.encode("ascii")]) + b"\n")
        answer = bytearray()
        while not answer.endswith(b"\n"):
            byte = sock.recv(1)
            if not byte or len(answer) > MAX_ANSWER_BYTES:
                raise LinkError(f"the controller's relay closed the connection to {name}")
            answer += byte
        if answer != b"ok\n":
            raise LinkError(f"the controller's relay {answer.decode('utf-8', 'replace').strip()}")
        sock.settimeout(timeout)
        return sock
    except BaseException:
        sock.close()
        raise
