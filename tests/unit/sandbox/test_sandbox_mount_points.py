"""Which files a launcher on standby may unpack: none at or below a bind mount's directories (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.sandbox.base import BindMount
from agent_eval_sandbox.sandbox.docker_sandbox import mount_points_within, touches_mount_points

MOUNTS = (
    BindMount(Path("/h/run"), "/run/agent-eval"),
    BindMount(Path("/h/skills"), "/workspace/.claude/skills"),
    BindMount(Path("/h/CLAUDE.md"), "/workspace/CLAUDE.md"),
)


def test_the_mount_targets_and_the_directories_made_for_them():
    assert mount_points_within("/workspace", MOUNTS) == {".claude", ".claude/skills", "CLAUDE.md"}
    assert mount_points_within("/home/agent", MOUNTS) == set()
    assert mount_points_within("/workspace", (BindMount(Path("/h"), "/workspace"),)) == set()


@pytest.mark.parametrize(("names", "touches"), [
    (["input.yaml", "notes.txt", "pkg", "pkg/a.py"], False),
    ([".", "./notes.txt", ".claudeX/x"], False),
    ([".claude"], True),
    ([".claude/settings.json"], True),
    (["./.claude/settings.json"], True),
    (["CLAUDE.md"], True),
    ([".claude/skills/mine/SKILL.md"], True),
])
def test_an_archive_touches_a_mount_point_if_any_member_is_at_or_below_one(names: list[str], touches: bool):
    assert touches_mount_points(names, "/workspace", MOUNTS) is touches


def test_no_mount_inside_touches_nothing():
    assert not touches_mount_points([".claude/settings.json"], "/workspace", MOUNTS[:1])
