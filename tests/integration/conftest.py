"""Fixtures shared by every integration test: the real sandbox image in the real daemon."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.errors import ImageError
from agent_eval_sandbox.sandbox.bootstrap import bootstrap_base
from agent_eval_sandbox.sandbox.docker_errors import connect
from agent_eval_sandbox.sandbox.image import (
    ImageSettings,
    ensure_sandbox_image,
    resolve_base,
)
from agent_eval_sandbox.sandbox.locks import host_lock


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The ref of the default sandbox image, building what is missing.

    Where no registry is reachable (CI, these machines) the base is made with
    bootstrap-base first (~1 min, once per machine); the image itself takes
    seconds and is reused while its inputs do not change.
    """
    client = connect()
    # A lock of its own: bootstrap_base takes the "bootstrap-base" lock itself.
    with host_lock("test-sandbox-base"):
        try:
            resolve_base(client, None, pull=False)
        except ImageError:
            bootstrap_base(client=client)
    return ensure_sandbox_image(ImageSettings(), client=client).ref
