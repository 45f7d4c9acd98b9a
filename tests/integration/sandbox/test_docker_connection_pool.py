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


# What a sandbox's command writes on its hijacked exec stream, shaped as the daemon's answers: were that
# connection ever handed back to the shared pool, the controller's next call would read it as the daemon's.
FORGED_ANSWER = ('HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: 44\\r\\n\\r\\n'
                 '{"Id": "forged", "State": {"Running": false}}')


def test_a_command_s_stream_never_answers_the_controller_s_calls(sandbox_image: str) -> None:
    import threading
    import time

    from agent_eval_sandbox.sandbox.base import SandboxSpec
    from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
    from agent_eval_sandbox.sandbox.teardown import run_scope

    backend = DockerBackend()
    run_id = f"test-pool-{uuid.uuid4().hex[:8]}"
    with run_scope(backend, run_id):
        sandbox = backend.create(SandboxSpec(sandbox_image, run_id, "forger", deadline_epoch=time.time() + 120))
        api = backend.client.api
        flood = f"end=$(($(date +%s) + 3)); while [ $(date +%s) -lt $end ]; do printf '{FORGED_ANSWER}'; done"
        results: list[object] = []
        command = threading.Thread(target=lambda: results.append(sandbox.exec(["sh", "-c", flood], timeout=60)))
        command.start()
        seen: list[str] = []
        while command.is_alive():  # while its stream is open, then once it ended
            seen.append(api.inspect_container(sandbox.container_id)["Id"])
        command.join()
        seen += [api.inspect_container(sandbox.container_id)["Id"] for _ in range(20)]
        sandbox.destroy()
    assert len(results) == 1 and results[0].exit_code == 0, results  # type: ignore[attr-defined]
    assert len(seen) > 20
    assert set(seen) == {sandbox.container_id}
