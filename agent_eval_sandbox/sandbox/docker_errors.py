"""The one boundary where Docker SDK and transport errors become ours."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import docker
import docker.errors
import requests
from docker.transport.unixconn import UnixHTTPAdapter

from agent_eval_sandbox.errors import DockerUnavailableError
from agent_eval_sandbox.sandbox.base import SandboxError

_START_DOCKER = (
    "start the Docker daemon (e.g. `sudo systemctl start docker`, or `dockerd &`), "
    "or point DOCKER_HOST at a running one"
)


def _unavailable(action: str, exc: BaseException) -> DockerUnavailableError:
    text = str(exc)
    if "Permission denied" in text or "PermissionError" in text:
        return DockerUnavailableError(
            f"not allowed to use the Docker daemon while {action}",
            fix="add your user to the `docker` group (then log in again), or run as root",
        )
    return DockerUnavailableError(f"cannot reach the Docker daemon while {action}: {text}", fix=_START_DOCKER)


@contextmanager
def docker_errors(action: str) -> Iterator[None]:
    """Map errors of the layer below: daemon gone -> DockerUnavailableError, API failure -> SandboxError.

    Callers that expect a specific API error (a missing image, a missing path)
    catch it inside this block, before it is mapped.
    """
    try:
        yield
    # wait()/reads that time out surface as ConnectionError (not ReadTimeout) in this SDK.
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
        raise _unavailable(action, exc) from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"{action} failed: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        # Raised by client creation when it cannot fetch the server's API version.
        raise _unavailable(action, exc) from exc


class _OneSocketPool(UnixHTTPAdapter):  # type: ignore[misc]  # docker ships no type information
    """The SDK's adapter for a unix socket keeps a connection pool per URL, so each container and exec
    id opens a connection of its own and drops an older pool: one pool serves every path of the one
    socket (an `exec_inspect` of a new id: 0.58 ms of the controller's CPU, 0.33 ms from the pool)."""

    POOL_KEY = "http+docker://localhost"

    def get_connection(self, url: str, proxies: object = None) -> object:
        return super().get_connection(self.POOL_KEY, proxies)


def _pool_by_socket(api: docker.APIClient) -> None:
    adapter = api.get_adapter(api.base_url)
    if type(adapter) is not UnixHTTPAdapter:
        return
    pooled = _OneSocketPool(f"http+unix://{adapter.socket_path}", timeout=adapter.timeout,
                            max_pool_size=adapter.max_pool_size)
    api.mount("http+docker://", pooled)
    api._custom_adapter = pooled  # what the SDK's own get_adapter() answers for its base URL
    adapter.close()


def connect() -> docker.DockerClient:
    """A client for the daemon the environment points at (DOCKER_HOST, default socket)."""
    with docker_errors("connecting"):
        # Parallel cases each hold a hijacked exec connection besides their API calls.
        client = docker.from_env(timeout=300, max_pool_size=64)
    if client.api.base_url.startswith("http+docker://"):
        # A local socket: no proxy or .netrc of the environment applies, and looking for them costs
        # every API call ~0.15 ms of the controller's CPU (a case makes ~15).
        client.api.trust_env = False
        _pool_by_socket(client.api)
    return client


def close_stream(sock: Any) -> None:
    """End a stream hijacked from the SDK and free its descriptor now.

    The SDK hands out a file object over the socket, and the socket and its HTTP response refer to
    each other: closing the file object alone leaves the connection open (the daemon sees no end)
    and the descriptor held until the garbage collector finds the cycle. A shutdown ends the
    connection at once; closing the socket itself frees the descriptor."""
    raw: socket.socket = getattr(sock, "_sock", sock)
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
    with contextlib.suppress(OSError):
        raw.close()
