"""The controller's Docker client keeps one pool of connections to a local socket, whatever the path.

The SDK's own adapter pools by URL: every container and exec id would open a connection of its own."""

from __future__ import annotations

import uuid

import docker.errors
import pytest

from agent_eval_sandbox.sandbox.docker_errors import connect

pytestmark = pytest.mark.docker


def test_calls_on_many_ids_share_one_connection() -> None:
    api = connect().api
    adapter = api.get_adapter(api.base_url)
    api.version()  # the pool and its first connection
    (key,) = adapter.pools.keys()
    pool = adapter.pools[key]
    opened: list[object] = []
    new_conn = pool._new_conn

    def counted() -> object:
        opened.append(new_conn())
        return opened[-1]

    pool._new_conn = counted
    for _ in range(12):  # more ids than the SDK kept pools for (10)
        with pytest.raises(docker.errors.NotFound):
            api.inspect_container(f"aes-no-such-{uuid.uuid4().hex}")
    assert list(adapter.pools.keys()) == [key]
    assert opened == []  # each call took the connection the first one left in the pool
