"""Labels, owners and the orphan rule (no Docker)."""

from __future__ import annotations

import os
import re
import socket

import pytest

from agent_eval_sandbox.sandbox import labels as L

NOW = 1_700_000_000.0


def labels_of(owner: str | None, deadline: float | str | None) -> dict[str, str]:
    out = {L.MANAGED: "1", L.RUN_ID: "r", L.CASE_ID: "c"}
    if owner is not None:
        out[L.OWNER] = owner
    if deadline is not None:
        out[L.DEADLINE] = str(deadline)
    return out


def reason(labels, start_times: dict[int, int], host: str = "here"):
    return L.orphan_reason(labels, now=NOW, hostname=host, start_time_of=start_times.get, grace_s=300)


def test_parse_start_time_survives_hostile_command_names():
    line = "4242 (evil) (name ) 7) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 " + "0 " * 30
    assert L.parse_start_time(line) == 987654


def test_current_owner_is_this_process():
    owner = L.current_owner()
    assert owner.pid == os.getpid() and owner.host == socket.gethostname()
    assert L.proc_start_time(os.getpid()) == owner.start_time
    assert L.parse_owner(owner.label()) == owner


@pytest.mark.parametrize("value", [None, "", "host", "host:12", "host:x:1", ":1:2", "host:1:"])
def test_unreadable_owners(value):
    assert L.parse_owner(value) is None


def test_owner_gone_on_this_host_is_an_orphan():
    assert "gone" in reason(labels_of("here:10:500", NOW + 3600), {})


def test_pid_reused_by_another_process_is_an_orphan():
    assert "gone" in reason(labels_of("here:10:500", NOW + 3600), {10: 999})


def test_live_owner_within_deadline_is_kept():
    assert reason(labels_of("here:10:500", NOW + 3600), {10: 500}) is None


def test_other_host_is_judged_by_deadline_only():
    assert reason(labels_of("there:10:500", NOW - 100), {}) is None  # within grace
    assert reason(labels_of("there:10:500", NOW - 301), {}) == "deadline passed 301 s ago"


def test_long_past_deadline_is_stale_even_with_a_live_owner():
    assert reason(labels_of("here:10:500", NOW - 1000), {10: 500}) is not None


@pytest.mark.parametrize("deadline", [None, "soon"])
def test_unreadable_labels_are_kept_for_gc_all(deadline):
    assert reason(labels_of("garbage", deadline), {}) is None


def test_object_labels_carry_everything_the_reaper_needs():
    owner = L.Owner("h", 1, 2)
    labels = L.object_labels(run_id="r1", case_id="c1", owner=owner, deadline_epoch=NOW + 0.9, extra={"x": "y"})
    assert labels == {
        "x": "y",
        L.MANAGED: "1",
        L.RUN_ID: "r1",
        L.CASE_ID: "c1",
        L.OWNER: "h:1:2",
        L.DEADLINE: str(int(NOW)),
    }


def test_extra_labels_cannot_override_ours():
    labels = L.object_labels(run_id="r", case_id="c", owner=L.Owner("h", 1, 2), deadline_epoch=0, extra={L.RUN_ID: "x"})
    assert labels[L.RUN_ID] == "r"


def test_object_names_are_valid_unique_and_bounded():
    names = {L.object_name("run/2024 01", "case: ünï/../x" * 20) for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", name)
        assert len(name) <= 120
    assert L.object_name("///", "...").startswith("aes-run-case-")
