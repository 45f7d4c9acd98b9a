"""The launcher on standby (`inside/standby.py`): started with the sandbox, handed its case's agent once.

The agent's exec must be the standby process itself (that is the time it
saves), with the case's environment and directory; it is used once, so no
launcher is left waiting while the agent runs; a command that is not the
launcher does not consume it; a standby that died is replaced by a plain exec.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.sandbox.base import BindMount
from agent_eval_sandbox.sandbox.docker_sandbox import DockerSandbox

pytestmark = pytest.mark.docker

# The launcher's child reports who started it and what it was given.
REPORT = 'echo "ppid=$PPID foo=$FOO cwd=$(pwd)"; echo prompt=$(cat)'
WAITING = "ps -eo pid=,args= | grep -F -- '--standby' | grep -v grep || true"


def launch(sandbox: DockerSandbox, command: str = REPORT, **kwargs):
    argv = ac.launcher_argv(["sh", "-c", command])
    return sandbox.exec(argv, env={"FOO": "from-the-case"}, cwd="/tmp", timeout=60, **kwargs)


def standby_pids(sandbox: DockerSandbox) -> list[int]:
    listing = sandbox.exec(["sh", "-c", WAITING], timeout=30).stdout or b""
    return [int(line.split()[0]) for line in listing.decode().splitlines() if line.strip()]


def waiting_pid(sandbox: DockerSandbox) -> int:
    """The launcher on standby, its pid inside, seen from the host: a command run in the sandbox to
    look would be its first, and files copied in after one go in by `docker cp`, not the go line.
    Its exec is started with the sandbox, its process a moment later."""
    deadline = time.monotonic() + 10
    while not (pids := host_view_of_standby(sandbox)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pids) == 1, f"the sandbox has {len(pids)} launchers on standby, not one"
    return pids[0]


def host_view_of_standby(sandbox: DockerSandbox) -> list[int]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"--standby" not in (proc / "cmdline").read_bytes() or \
                    sandbox.container_id not in (proc / "cgroup").read_text():
                continue
            nspid = [line for line in (proc / "status").read_text().splitlines() if line.startswith("NSpid:")]
        except OSError:
            continue
        found.append(int(nspid[0].split()[-1]))
    return found


def report_of(result) -> dict[str, str]:
    assert result.exit_code == 0, result
    return dict(part.split("=", 1) for line in result.stdout.decode().splitlines() for part in line.split(" "))


def test_the_agent_is_handed_to_the_waiting_launcher_once_with_its_env_and_directory(make_on_standby):
    sandbox = make_on_standby("once")
    waiting = waiting_pid(sandbox)
    first = report_of(launch(sandbox))
    assert int(first["ppid"]) == waiting, "the agent was not started by the launcher on standby"
    assert first["foo"] == "from-the-case" and first["cwd"] == "/tmp" and first["prompt"] == "the-prompt"
    assert standby_pids(sandbox) == [], "a launcher is still waiting after the agent's start"

    second = report_of(launch(sandbox))
    assert int(second["ppid"]) != waiting and second["foo"] == "from-the-case" and second["cwd"] == "/tmp"


def test_no_launcher_waits_while_the_agent_runs(make_on_standby):
    """The one it was handed to runs the agent (its parent); no other is left for the agent to talk to."""
    sandbox = make_on_standby("during")
    result = launch(sandbox, command=f'{{ {WAITING}; }} | grep -v "^ *$PPID " || true')
    assert result.exit_code == 0 and result.stdout == b"", result.stdout


def test_other_commands_leave_the_standby_for_the_agent(make_on_standby):
    sandbox = make_on_standby("others")
    waiting = waiting_pid(sandbox)
    assert sandbox.exec(["sh", "-c", "echo hook > /workspace/hook.txt"], timeout=30).ok
    assert sandbox.exec(["sh", "-c", "cat"], stdin=b"input", timeout=30).stdout == b"input"
    assert int(report_of(launch(sandbox))["ppid"]) == waiting


def test_a_standby_that_died_is_replaced_by_a_plain_exec(make_on_standby):
    sandbox = make_on_standby("died")
    pid = waiting_pid(sandbox)
    assert sandbox.exec(["kill", "-9", str(pid)], timeout=30).ok
    time.sleep(0.5)
    report = report_of(launch(sandbox))
    assert int(report["ppid"]) != pid and report["foo"] == "from-the-case"


def test_a_spec_without_a_launcher_starts_none(make_on_standby):
    sandbox = make_on_standby("none", standby=())
    time.sleep(1)  # a launcher started with it would be there by now
    assert standby_pids(sandbox) == []
    assert report_of(launch(sandbox))["foo"] == "from-the-case"


def test_the_sandbox_user_cannot_reach_the_standby_input(make_on_standby):
    """Only the controller may write the go line: the launcher is non-dumpable before it reads it,
    so its stdin cannot be opened through /proc by another process of the same user (runc)."""
    sandbox = make_on_standby("reach")
    pid = waiting_pid(sandbox)
    probe = sandbox.exec(["sh", "-c", f"echo '{{\"argv\": []}}' > /proc/{pid}/fd/0 && echo WROTE"], timeout=30)
    assert b"WROTE" not in (probe.stdout or b""), "the sandbox user wrote into the launcher's input"
    assert b"Permission denied" in (probe.stderr or b""), probe
    assert int(report_of(launch(sandbox))["ppid"]) == pid


# ---- files copied in while the launcher waits go in with its go line ----------------------------

LISTING = "cd /workspace && find . -mindepth 1 | sort | xargs stat -c '%n %U:%G %a %s %Y %F'"


def workspace(root: Path) -> Path:
    (root / "pkg" / "deep").mkdir(parents=True)
    (root / "pkg" / "deep" / "mod.py").write_text("VALUE = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "private.txt").write_text("mode 600\n")
    (root / "private.txt").chmod(0o600)
    (root / "link").symlink_to("pkg/deep/mod.py")
    return root


def test_files_copied_in_reach_the_agent_as_docker_would_have_put_them(make_on_standby, tmp_path: Path):
    files = workspace(tmp_path / "ws")
    plain = make_on_standby("plain", standby=())
    plain.copy_in(files, "/workspace")
    expected = plain.exec(["sh", "-c", LISTING], timeout=30)
    assert expected.ok and b"run.sh agent:agent 755" in expected.stdout, expected

    waiting = make_on_standby("waiting")
    pid = waiting_pid(waiting)
    waiting.copy_in(files, "/workspace")
    # Not copied yet (no docker cp): they go in with the go line.
    assert list(workspace_volume(backend_of(waiting), waiting).iterdir()) == []
    seen = launch(waiting, command=f'echo "ppid=$PPID"; {LISTING}')
    assert seen.exit_code == 0, seen.stderr
    ppid, listing = seen.stdout.split(b"\n", 1)
    assert int(ppid.split(b"=")[1]) == pid
    assert listing == expected.stdout


def backend_of(sandbox: DockerSandbox):
    return sandbox._api  # noqa: SLF001 - the test looks behind the sandbox at its volume


def workspace_volume(api, sandbox: DockerSandbox) -> Path:
    """Where the daemon mounted the sandbox's workspace volume on this host."""
    mounts = {m["Destination"]: m for m in api.inspect_container(sandbox.container_id)["Mounts"]}
    return Path(mounts["/workspace"]["Source"])


def test_files_copied_in_are_there_for_any_other_command_and_for_copy_out(make_on_standby, tmp_path: Path):
    files = workspace(tmp_path / "ws")
    sandbox = make_on_standby("others-see")
    sandbox.copy_in(files, "/workspace")
    assert sandbox.exec(["cat", "/workspace/private.txt"], timeout=30).stdout == b"mode 600\n"
    assert waiting_pid(sandbox)  # still waiting for the agent

    fresh = make_on_standby("copy-out")
    fresh.copy_in(files, "/workspace")
    report = fresh.copy_out("/workspace", tmp_path / "out", max_bytes=10**6, max_files=100)
    assert report.files == 3 and (tmp_path / "out" / "run.sh").read_text() == "#!/bin/sh\necho run\n"


def test_files_copied_in_before_a_standby_died_still_reach_the_agent(make_on_standby, tmp_path: Path):
    sandbox = make_on_standby("died-files")
    pid = waiting_pid(sandbox)
    sandbox.copy_in(workspace(tmp_path / "ws"), "/workspace")
    # Killed from outside the sandbox's own commands: an exec would send the files in first.
    os.kill(host_pid(sandbox, pid), 9)
    time.sleep(0.5)
    result = launch(sandbox, command="cat /workspace/private.txt")
    assert result.exit_code == 0 and result.stdout == b"mode 600\n", result


def host_pid(sandbox: DockerSandbox, pid_inside: int) -> int:
    """The host pid of a process of the sandbox (runc: its NSpid line names both)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("NSpid:") and line.split()[-1] == str(pid_inside) and len(line.split()) > 2:
                cgroup = (status.parent / "cgroup").read_text()
                if sandbox.container_id in cgroup:
                    return int(line.split()[1])
    raise AssertionError(f"no host process for pid {pid_inside} of {sandbox.name}")


def test_a_launcher_started_another_way_ends_the_standby_first(make_on_standby):
    """A pipeline step's prompt comes on stdin, so its launcher is a plain exec: found by the red team,
    the unused one went on waiting beside step 1's agent, which could stop it (and, under gVisor,
    open its input)."""
    sandbox = make_on_standby("pipeline")
    waiting_pid(sandbox)
    argv = ac.launcher_argv(["sh", "-c", f'cat; {WAITING}'], prompt_file=ac.PROMPT_ON_STDIN)
    result = sandbox.exec(argv, stdin=b"step prompt\n", cwd="/tmp", timeout=60)
    assert result.exit_code == 0 and result.stdout == b"step prompt\n", result


def test_a_second_copy_over_read_only_files_is_docker_s_not_the_launcher_s(make_on_standby, tmp_path: Path):
    """A host before_each hook changes the staged copy and it is sent in again: the second copy
    overwrites read-only files, which only `docker cp` (as root) may. Found by the suite: the
    launcher, unpacking both as the sandbox user, could not (exit 125, the case an error)."""
    files = workspace(tmp_path / "ws")
    (files / ".claude").mkdir()
    (files / ".claude" / "settings.json").write_text("{}\n")
    (files / ".claude" / "settings.json").chmod(0o444)
    (files / "frozen").mkdir()
    (files / "frozen" / "kept.txt").write_text("kept\n")
    (files / "frozen").chmod(0o555)
    try:
        sandbox = make_on_standby("twice")
        pid = waiting_pid(sandbox)
        sandbox.copy_in(files, "/workspace")
        (files / "private.txt").chmod(0o600)
        (files / "private.txt").write_text("changed by a host hook\n")
        sandbox.copy_in(files, "/workspace")
        seen = launch(sandbox, command='echo "ppid=$PPID"; cat /workspace/private.txt /workspace/frozen/kept.txt; '
                                       'stat -c %a /workspace/.claude/settings.json /workspace/frozen')
        assert seen.exit_code == 0, seen.stderr
        assert seen.stdout.decode().splitlines() == [f"ppid={pid}", "changed by a host hook", "kept", "444", "555"]
    finally:
        (files / "frozen").chmod(0o755)


def test_files_beside_a_mount_in_the_workspace_reach_the_agent_as_docker_would_have_put_them(make_on_standby,
                                                                                             tmp_path: Path):
    """The project's skills are mounted at /workspace/.claude/skills: runc makes /workspace/.claude for
    it, owned by root, where the staged .claude/settings.json must go. Found by the suite: the launcher
    could not write there (exit 125, the case an error); such files go in by `docker cp` (as root)."""
    skills = tmp_path / "skills"
    (skills / "s").mkdir(parents=True)
    (skills / "s" / "SKILL.md").write_text("a skill\n")
    os.chmod(tmp_path, 0o755)
    mounts = (BindMount(skills, "/workspace/.claude/skills"),)
    files = workspace(tmp_path / "ws")
    (files / ".claude").mkdir()
    (files / ".claude" / "settings.json").write_text("{}\n")
    listing = LISTING.replace("find . -mindepth 1", "find . -mindepth 1 -not -path './.claude/skills/*'")

    plain = make_on_standby("plain-mounted", standby=(), mounts=mounts)
    plain.copy_in(files, "/workspace")
    expected = plain.exec(["sh", "-c", listing], timeout=30)
    assert expected.ok and b"./.claude/settings.json agent:agent" in expected.stdout, expected

    waiting = make_on_standby("waiting-mounted", mounts=mounts)
    pid = waiting_pid(waiting)
    waiting.copy_in(files, "/workspace")
    seen = launch(waiting, command=f'echo "ppid=$PPID"; {listing}')
    assert seen.exit_code == 0, seen.stderr
    ppid, got = seen.stdout.split(b"\n", 1)
    assert int(ppid.split(b"=")[1]) == pid and got == expected.stdout
