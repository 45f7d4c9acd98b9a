"""Image tags are a pure function of every build input (no Docker)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox.claude_binary import ClaudeBinary
from agent_eval_sandbox.sandbox.image import (
    DOCKERFILE,
    IMAGES_DIR,
    INSIDE_DIR,
    ImageInputs,
    context_files,
    image_inputs,
    image_tag,
)

BASE = ImageInputs(
    files=(("sandbox.Dockerfile", "a" * 64), ("inside/hook.py", "b" * 64)),
    claude_version="2.1.332",
    claude_integrity="sha512-xyz",
    base_image_id="sha256:" + "1" * 64,
    arch="x86_64",
)


def test_same_inputs_same_tag_and_a_valid_reference():
    assert image_tag(BASE) == image_tag(dataclasses.replace(BASE))
    assert re.fullmatch(r"agent-eval-sandbox:2\.1\.332-[0-9a-f]{16}", image_tag(BASE))


@pytest.mark.parametrize(
    "change",
    [
        {"files": (("sandbox.Dockerfile", "c" * 64), ("inside/hook.py", "b" * 64))},
        {"files": (("sandbox.Dockerfile", "a" * 64), ("inside/other.py", "b" * 64))},
        {"files": (("sandbox.Dockerfile", "a" * 64),)},
        {"claude_version": "2.1.333"},
        {"claude_integrity": "sha512-other"},
        {"base_image_id": "sha256:" + "2" * 64},
        {"arch": "aarch64"},
    ],
)
def test_every_input_changes_the_tag(change):
    assert image_tag(dataclasses.replace(BASE, **change)) != image_tag(BASE)


def test_context_covers_the_real_image_files():
    files = context_files()
    assert files[DOCKERFILE] == IMAGES_DIR / DOCKERFILE
    assert files["sandbox-setup.sh"].is_file()
    assert all(name.startswith("inside/") for name in files if name not in (DOCKERFILE, "sandbox-setup.sh"))
    assert all(path.is_relative_to(INSIDE_DIR) or path.parent == IMAGES_DIR for path in files.values())


def test_inside_scripts_are_hashed_by_content_and_bytecode_is_ignored(tmp_path: Path):
    images, inside = tmp_path / "images", tmp_path / "inside"
    images.mkdir()
    (images / DOCKERFILE).write_text("FROM x\n")
    (images / "sandbox-setup.sh").write_text("true\n")
    (inside / "pkg" / "__pycache__").mkdir(parents=True)
    (inside / "forwarder.py").write_text("print(1)\n")
    (inside / "pkg" / "mod.py").write_text("x = 1\n")
    (inside / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\x00")
    (inside / "stray.pyc").write_bytes(b"\x00")
    files = context_files(images, inside)
    assert sorted(files) == sorted(["inside/forwarder.py", "inside/pkg/mod.py", DOCKERFILE, "sandbox-setup.sh"])

    claude = ClaudeBinary("2.1.332", "x86_64", tmp_path / "claude", "sha512-xyz")
    before = image_tag(image_inputs(files, claude, "sha256:1", "x86_64"))
    (inside / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\x01")
    assert image_tag(image_inputs(context_files(images, inside), claude, "sha256:1", "x86_64")) == before
    (inside / "pkg" / "mod.py").write_text("x = 2\n")
    assert image_tag(image_inputs(context_files(images, inside), claude, "sha256:1", "x86_64")) != before


def test_the_dockerfile_keeps_its_contract():
    text = (IMAGES_DIR / DOCKERFILE).read_text()
    for needle in (
        "ARG BASE_IMAGE=debian:bookworm-slim",
        "COPY claude /usr/local/bin/claude",
        "COPY inside/ /opt/agent-eval/",
        "DISABLE_AUTOUPDATER=1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        "DISABLE_TELEMETRY=1",
        "DISABLE_ERROR_REPORTING=1",
        "CLAUDE_CODE_MAX_RETRIES=2",
        "WORKDIR /workspace",
        "USER 1000:1000",
        'CMD ["sleep", "infinity"]',
    ):
        assert needle in text
