"""Every layer of the lifecycle benchmark lives and ends through the real daemon, leaving nothing of its run.

A benchmark that breaks only shows when someone reruns it for figures; this runs each layer once."""

from __future__ import annotations

import uuid

import pytest

from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.image import ensure_sandbox_image
from benchmarks.lifecycle import LAYERS, NOTHING, layer_works
from tests.docker_objects import objects_of_run

pytestmark = pytest.mark.docker


def test_each_layer_runs_once_and_leaves_nothing_behind() -> None:
    backend = DockerBackend()
    image = ensure_sandbox_image(client=backend.client).ref
    run_id = f"test-life-{uuid.uuid4().hex[:8]}"
    works = layer_works(backend, image, run_id, None)
    assert list(works) == [NOTHING, *LAYERS]
    for name, work in works.items():
        work()
        assert objects_of_run(run_id) == [], f"{name} left objects of its run behind"
