"""A case looks for its neighbours: the cases running beside it and the ones whose sandboxes the pool made ahead.

Four cases at parallelism 2: while two run, the pool holds the sandboxes of
the next two, made before their cases started, and removes finished ones in
the background. Each case's workspace holds a marker naming its case. From
inside, each case (after a pause, so that its neighbours are alive) leaves a
file of its own in every writable place, then searches every mount of its
sandbox for any marker, lists every unix socket, its channel directory and the
host directories behind its bind mounts. It must find its own things only;
and no case may find what a case before it left: a sandbox serves one case.
"""

from __future__ import annotations

import pytest

from .conftest import AttackRun, bash, by_probe, final, make_project, probe_steps, run_attack, write_eval

pytestmark = pytest.mark.docker

CASES = ("c1", "c2", "c3", "c4")
MARK_PARTS = ["NEIGH", "BOUR-"]  # split: no command or prompt holds a marker whole
MARK = "".join(MARK_PARTS)


@pytest.fixture(scope="module")
def neighbours_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "neighbours", runtime)
    write_eval(project, """
        name: attack-neighbours
        execution: {prompt: "case {who}", timeout: 300, parallelism: 2}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases, workspace: {files: [notes.txt]}}
    """, runtime)
    for case_id in CASES:
        project.case(case_id, {"who": case_id}, files={"notes.txt": f"{MARK}{case_id}\n"}, script=[
            bash("sleep 3"),  # the neighbours are alive, running or made ahead
            *probe_steps("neighbours", {"me": case_id, "mark": MARK_PARTS}, timeout_ms=300_000),
            final(f"{case_id} looked"),
        ])
    return run_attack(project, runtime, "neighbours", "--offline")


def _probes(run: AttackRun, case_id: str) -> dict[str, dict]:
    grouped = by_probe(run.output(case_id))
    assert set(grouped) >= {"identity", "found", "sockets", "run_dir", "mounts"}, run.output(case_id)[-3000:]
    return {name: records[0] for name, records in grouped.items()}


def test_every_case_ran_to_its_end(neighbours_run):
    for case_id in CASES:
        entry = neighbours_run.entry(case_id)
        assert entry["exit_code"] == 0 and entry["result"] == f"{case_id} looked", entry


def test_a_sandbox_serves_one_case_and_nothing_of_an_earlier_case_is_in_it(neighbours_run):
    identities = {case_id: _probes(neighbours_run, case_id)["identity"] for case_id in CASES}
    assert len({seen["hostname"] for seen in identities.values()}) == len(CASES), identities
    assert all(seen["leftovers"] == [] for seen in identities.values()), identities


def test_no_case_finds_a_neighbour_s_files_only_its_own(neighbours_run):
    for case_id in CASES:
        hits = _probes(neighbours_run, case_id)["found"]["hits"]
        assert {hit["case"] for hit in hits} == {case_id}, (case_id, hits)
        assert any(hit["path"] == "/workspace/notes.txt" for hit in hits)  # the search does find markers


def test_no_case_reaches_a_neighbour_s_sockets_or_prompt(neighbours_run):
    for case_id in CASES:
        seen = _probes(neighbours_run, case_id)
        # (the CLI's own sockets in its private /tmp aside)
        sockets = [path for path in seen["sockets"]["paths"] if not path.startswith("/tmp/cc-socks/")]
        assert sockets == ["/run/agent-eval/gateway.sock"]
        assert seen["run_dir"]["listing"] == ["gateway.sock", "prompt.txt"]
        assert seen["run_dir"]["prompt"].strip() == f"case {case_id}"


def test_each_case_s_mounts_are_its_own_host_directories(neighbours_run):
    """mountinfo names the host directory behind each bind mount (runc; gVisor shows none): one of its own."""
    behind = {case_id: {m["target"]: m["root"] for m in _probes(neighbours_run, case_id)["mounts"]["mounts"]}
              for case_id in CASES}
    channel_dirs = [mounts.get("/run/agent-eval") for mounts in behind.values()]
    shown = [path for path in channel_dirs if path and path != "/"]
    if neighbours_run.runtime == "runc":
        assert len(shown) == len(CASES), behind
    assert len(set(shown)) == len(shown), behind  # no two cases share a channel directory
    hosts_files = [mounts.get("/etc/hosts") for mounts in behind.values()]
    shown_hosts = [path for path in hosts_files if path and path != "/"]
    if neighbours_run.runtime == "runc":
        assert len(shown_hosts) == len(CASES), behind
    assert len(set(shown_hosts)) == len(shown_hosts), behind  # nor an /etc/hosts: each sandbox's own directory
