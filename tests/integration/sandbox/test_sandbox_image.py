"""Image selection against the real daemon: cached by inputs, prebuilt used as-is, clear errors."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.errors import ImageError
from agent_eval_sandbox.sandbox import image
from agent_eval_sandbox.sandbox.bootstrap import local_base_ref
from agent_eval_sandbox.sandbox.image import (
    ImageSettings,
    ensure_sandbox_image,
    resolve_base,
)

pytestmark = pytest.mark.docker


def test_an_unchanged_image_is_not_rebuilt(backend, sandbox_image):
    again = ensure_sandbox_image(ImageSettings(), client=backend.client)
    assert again.ref == sandbox_image and again.built is False
    labels = backend.client.api.inspect_image(sandbox_image)["Config"]["Labels"]
    assert labels["agent-eval-sandbox.inputs"] == sandbox_image.rsplit("-", 1)[1]


def test_a_prebuilt_image_is_used_as_is(backend, sandbox_image):
    chosen = ensure_sandbox_image(ImageSettings(image=sandbox_image), client=backend.client)
    assert (chosen.ref, chosen.built) == (sandbox_image, False)


def test_the_bootstrapped_base_is_preferred_when_none_is_configured(backend, sandbox_image):
    ref, image_id = resolve_base(backend.client, None, pull=False)
    assert ref == local_base_ref()
    assert image_id == backend.client.images.get(local_base_ref()).id


def test_missing_images_fail_with_one_line_and_a_fix(backend):
    with pytest.raises(ImageError) as base_err:
        resolve_base(backend.client, "agent-eval-sandbox-test/no-such-base:never", pull=False)
    assert "sandbox.base_image" in base_err.value.message and base_err.value.fix
    with pytest.raises(ImageError) as image_err:
        ensure_sandbox_image(ImageSettings(image="agent-eval-sandbox-test/no-such-image:never"), client=backend.client)
    assert "sandbox.image" in image_err.value.message and "\n" not in str(image_err.value)


def test_no_base_anywhere_tells_the_user_to_bootstrap(backend, monkeypatch):
    monkeypatch.setattr(image, "local_base_ref", lambda: "agent-eval-sandbox-test/no-base:never")
    monkeypatch.setattr(image, "REGISTRY_BASE", "agent-eval-sandbox-test/no-registry-base:never")
    with pytest.raises(ImageError) as err:
        resolve_base(backend.client, None)
    assert "agent-eval-sandbox image bootstrap-base" in err.value.fix and "sandbox.base_image" in err.value.fix
