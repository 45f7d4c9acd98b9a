"""`gc --images` on the real daemon, in a repository of the test's own (never the tool's real one:
other runs on this machine use those images)."""

from __future__ import annotations

import io
import secrets
from collections.abc import Iterator

import docker
import docker.errors
import pytest

from agent_eval_sandbox.sandbox.bootstrap import local_base_ref
from agent_eval_sandbox.sandbox.docker_errors import connect
from agent_eval_sandbox.sandbox.image import INPUTS_LABEL
from agent_eval_sandbox.sandbox.image_gc import remove_stale_images

pytestmark = pytest.mark.docker


def _build(client: docker.DockerClient, tag: str, size_bytes: int) -> str:
    """An image of this tool's kind (the inputs label) with a layer of its own of `size_bytes`."""
    dockerfile = (f"FROM {local_base_ref()}\nLABEL {INPUTS_LABEL}={tag.rsplit(':', 1)[1]}\n"
                  f"RUN head -c {size_bytes} /dev/urandom > /blob-{secrets.token_hex(4)}\n")
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, network_mode="none")
    return str(image.id)


@pytest.fixture
def repository(sandbox_image: str) -> Iterator[str]:
    client = connect()
    name = f"aes-gc-test-{secrets.token_hex(4)}"
    yield name
    for container in client.api.containers(all=True, filters={"label": f"aes-gc-test={name}"}):
        client.api.remove_container(container["Id"], force=True)
    for image in client.api.images(name=name):
        for tag in image.get("RepoTags") or ():
            try:
                client.api.remove_image(tag, force=True)
            except docker.errors.NotFound:
                pass


def test_stale_images_go_the_current_one_and_one_a_container_uses_stay(repository):
    client = connect()
    current, stale, used = f"{repository}:1-current", f"{repository}:1-stale", f"{repository}:1-used"
    for tag in (current, stale, used):
        _build(client, tag, 4 * 2**20)
    running = client.containers.run(used, ["sleep", "300"], detach=True, network_mode="none",
                                    labels={"aes-gc-test": repository})
    try:
        result = remove_stale_images(client, [current], repository=repository)
    finally:
        running.remove(force=True)

    assert [(r.kind, r.name) for r in result.removed] == [("image", stale)]
    assert result.kept_in_use == [used]
    assert result.freed_bytes >= 4 * 2**20  # at least its own layer
    left = {tag for image in client.api.images(name=repository) for tag in image["RepoTags"]}
    assert left == {current, used}
