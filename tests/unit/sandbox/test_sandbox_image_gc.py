"""Which sandbox images `gc --images` removes (sandbox/image_gc.stale_images, pure)."""

from __future__ import annotations

from agent_eval_sandbox.sandbox.image import INPUTS_LABEL
from agent_eval_sandbox.sandbox.image_gc import StaleImage, stale_images

REPO = "agent-eval-sandbox"


def _image(image_id: str, *tags: str, built_here: bool = True) -> dict:
    return {"Id": image_id, "RepoTags": list(tags), "Labels": {INPUTS_LABEL: "abc"} if built_here else {}}


def test_an_image_no_current_tag_names_is_stale_unless_a_container_uses_it():
    images = [
        _image("sha:current", f"{REPO}:1-current"),
        _image("sha:old", f"{REPO}:1-old"),
        _image("sha:old-in-use", f"{REPO}:1-older"),
    ]
    remove, keep = stale_images(images, {f"{REPO}:1-current"}, {"sha:old-in-use"}, REPO)
    assert remove == [StaleImage("sha:old", (f"{REPO}:1-old",))]
    assert keep == [StaleImage("sha:old-in-use", (f"{REPO}:1-older",))]


def test_images_not_built_by_this_tool_or_outside_its_repository_are_never_touched():
    images = [
        _image("sha:prebuilt", f"{REPO}:mine", built_here=False),  # a user's image tagged into the repository
        _image("sha:elsewhere", "someone/else:1"),
        _image("sha:dangling"),  # no tag at all
        _image("sha:also-current", f"{REPO}:1-current", "mirror/copy:1"),
    ]
    assert stale_images(images, {f"{REPO}:1-current"}, set(), REPO) == ([], [])


def test_only_the_repository_s_own_tags_of_a_stale_image_are_removed():
    images = [_image("sha:old", f"{REPO}:1-old", f"{REPO}:latest-copy", "other/repo:keep")]
    remove, _ = stale_images(images, set(), set(), REPO)
    assert remove == [StaleImage("sha:old", (f"{REPO}:1-old", f"{REPO}:latest-copy"))]
