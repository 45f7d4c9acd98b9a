"""`gc --images`: remove the sandbox images that today's inputs no longer name.

Every change to the image's inputs (the Dockerfile, the `inside/` scripts,
the Claude Code version, the base image) builds an image under a new tag
(`image.py`), and the old ones stay. An image is stale when it was built by
this tool (it carries the inputs label), sits in the tool's repository, and
none of its tags is one that the current inputs hash to. A stale image that a
container uses (running or not) is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors

from agent_eval_sandbox.sandbox.base import RemovedObject
from agent_eval_sandbox.sandbox.docker_errors import docker_errors
from agent_eval_sandbox.sandbox.image import INPUTS_LABEL, SANDBOX_REPOSITORY


@dataclass(frozen=True)
class StaleImage:
    image_id: str
    tags: tuple[str, ...]  # its tags in the tool's repository


@dataclass
class ImageGcResult:
    removed: list[RemovedObject] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)  # stale, but a container uses them
    freed_bytes: int = 0


def stale_images(images: Iterable[Mapping[str, Any]], current_tags: set[str], in_use: set[str],
                 repository: str = SANDBOX_REPOSITORY) -> tuple[list[StaleImage], list[StaleImage]]:
    """(stale images to remove, stale images a container uses) from the daemon's image list (pure)."""
    remove: list[StaleImage] = []
    keep: list[StaleImage] = []
    for image in images:
        labels = image.get("Labels") or {}
        if INPUTS_LABEL not in labels:
            continue  # not built by this tool (e.g. a prebuilt image tagged into the repository)
        tags = tuple(tag for tag in image.get("RepoTags") or () if tag.rpartition(":")[0] == repository)
        if not tags or any(tag in current_tags for tag in tags):
            continue
        (keep if image["Id"] in in_use else remove).append(StaleImage(image["Id"], tags))
    return remove, keep


def remove_stale_images(client: docker.DockerClient, current_tags: Sequence[str],
                        repository: str = SANDBOX_REPOSITORY) -> ImageGcResult:
    api = client.api
    with docker_errors("listing sandbox images"):
        images = api.images(name=repository)
        in_use = {c.get("ImageID") for c in api.containers(all=True)}
        before = _layers_size(api)
    remove, keep = stale_images(images, set(current_tags), {i for i in in_use if i}, repository)
    result = ImageGcResult(kept_in_use=[tag for image in keep for tag in image.tags])
    for image in remove:
        for tag in image.tags:
            with docker_errors(f"removing image {tag}"):
                try:
                    api.remove_image(tag)  # never forced: an image a container took meanwhile stays
                except docker.errors.NotFound:
                    continue
                except docker.errors.APIError as exc:
                    if exc.status_code == 409:
                        result.kept_in_use.append(tag)
                        continue
                    raise
            result.removed.append(RemovedObject("image", tag, None, None, "built from inputs that changed since"))
    if result.removed:
        with docker_errors("measuring the images' disk use"):
            result.freed_bytes = max(0, before - _layers_size(api))
    return result


def _layers_size(api: docker.APIClient) -> int:
    """What all images take on disk, their shared layers counted once."""
    return int(api.df().get("LayersSize") or 0)
