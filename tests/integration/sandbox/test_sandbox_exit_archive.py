"""Files the launcher archives as its agent exits (`inside/exit_archive.py`), in a real sandbox.

After `expect_copy_out`, the copy-outs that follow the agent's exec come from
the launcher's archives instead of Docker's archive API: the same files, modes
and skipped entries as Docker's copy gives, the agent's output unchanged, and
Docker's copy whenever the launcher's cannot be trusted to be the whole truth
(a file the sandbox user cannot read, a deadline, anything run since).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.inside import exit_archive as ea
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.sandbox.archive import CopyOutReport
from agent_eval_sandbox.sandbox.base import BindMount
from agent_eval_sandbox.sandbox.docker_sandbox import DockerSandbox
from tests.integration.sandbox.test_sandbox_standby import waiting_pid

pytestmark = pytest.mark.docker

WORKSPACE, TRANSCRIPTS = "/workspace", "/home/agent/.claude/projects"
CAPS = {"max_bytes": 64 * 1024 * 1024, "max_files": 10_000}
# What an agent leaves: modes, links, an empty directory, a fifo, a name in UTF-8, a transcript.
LEAVES = (
    "mkdir -p deep/er/still empty /home/agent/.claude/projects/-workspace; "
    "printf 'exec\\n' > run.sh; chmod 750 run.sh; printf 'private' > deep/er/still/p.txt; "
    "chmod 600 deep/er/still/p.txt; "
    "ln -s deep/er/still/p.txt rel-link; ln -s /etc/passwd abs-link; ln run.sh hard-link; mkfifo pipe; "
    "printf 'ü' > 'naïve name.txt'; head -c 300000 /dev/urandom > big.bin; "
    "printf '{\"type\":\"user\"}\\n' > /home/agent/.claude/projects/-workspace/s.jsonl"
)


def agent(sandbox: DockerSandbox, command: str, *, timeout: float = 60, **env: str):
    """`command` as the case's agent: through the launcher (on standby), in the workspace."""
    return sandbox.exec(ac.launcher_argv(["sh", "-c", command]), env=env, cwd=WORKSPACE, timeout=timeout)


def counting_archives(sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths Docker's archive API is asked for from here on."""
    api = sandbox._api  # noqa: SLF001 - the test watches the sandbox's calls to the daemon
    asked: list[str] = []
    real = api.get_archive

    def get_archive(container: str, path: str, *args, **kwargs):
        asked.append(path)
        return real(container, path, *args, **kwargs)

    monkeypatch.setattr(api, "get_archive", get_archive)
    return asked


def collecting(make_on_standby, case_id: str, monkeypatch: pytest.MonkeyPatch,
               paths: tuple[str, ...] = (WORKSPACE,), **spec) -> tuple[DockerSandbox, list[str]]:
    """A sandbox whose launcher waits, told that `paths` will be copied out after the agent, and the
    paths Docker's archive API is asked for from then on."""
    sandbox = make_on_standby(case_id, **spec)
    waiting_pid(sandbox)
    sandbox.expect_copy_out(list(paths), **CAPS)
    return sandbox, counting_archives(sandbox, monkeypatch)


def tree(root: Path) -> dict[str, object]:
    return {str(p.relative_to(root)): "dir" if p.is_dir() else (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*"))}


def summary(report: CopyOutReport) -> tuple[object, ...]:
    return report.found, report.files, report.dirs, report.bytes, sorted((s.path, s.kind) for s in report.skipped)


def test_the_copy_out_after_the_agent_is_the_launchers_and_the_same_as_dockers(make_on_standby, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    sandbox, asked = collecting(make_on_standby, "exit-archive", monkeypatch, paths=(WORKSPACE, TRANSCRIPTS))
    forged = ea.json_frame(ea.BEGIN, {"path": WORKSPACE, "found": True}) + ea.frame(ea.DATA, b"x")
    sandbox.copy_in_files({"forged.bin": forged}, WORKSPACE)
    # Output that looks like frames, and more than a pipe holds, is the agent's output as it is.
    ran = agent(sandbox, f"{LEAVES}; head -c 100000 /dev/zero; cat forged.bin")
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout == b"\0" * 100000 + forged

    launcher = sandbox.copy_out(WORKSPACE, tmp_path / "launcher", **CAPS)
    transcripts = sandbox.copy_out(TRANSCRIPTS, tmp_path / "transcripts", **CAPS)
    assert asked == []  # neither came through Docker's archive API
    assert (tmp_path / "transcripts" / "-workspace" / "s.jsonl").read_text() == '{"type":"user"}\n'
    assert transcripts.files == 1

    # The archive is used once: a second copy of the same path is Docker's, and the same.
    docker = sandbox.copy_out(WORKSPACE, tmp_path / "docker", **CAPS)
    assert asked == [WORKSPACE]
    assert tree(tmp_path / "launcher") == tree(tmp_path / "docker")
    assert summary(launcher) == summary(docker)
    assert {(s.path, s.kind) for s in launcher.skipped} >= {("rel-link", "symlink"), ("abs-link", "symlink"),
                                                          ("pipe", "fifo")}


def test_a_file_the_sandbox_user_cannot_read_is_copied_out_by_docker(make_on_standby, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """The launcher reads as the sandbox user; Docker's copy reads everything, so it decides."""
    sandbox, asked = collecting(make_on_standby, "unreadable", monkeypatch, paths=(WORKSPACE, TRANSCRIPTS))
    ran = agent(sandbox, "echo kept > kept.txt; echo locked > locked.txt; chmod 000 locked.txt; "
                         "mkdir shut; echo in > shut/in.txt; chmod 000 shut")
    assert ran.exit_code == 0, ran.stderr
    report = sandbox.copy_out(WORKSPACE, tmp_path / "out", **CAPS)
    sandbox.copy_out(TRANSCRIPTS, tmp_path / "transcripts", **CAPS)
    assert asked == [WORKSPACE]  # the workspace's archive failed; the (missing) transcripts' did not
    assert (tmp_path / "out" / "locked.txt").read_bytes() == b"locked\n"
    assert (tmp_path / "out" / "shut" / "in.txt").read_bytes() == b"in\n" and report.files == 3


def test_at_a_deadline_the_files_are_docker_s_copy_as_the_freeze_left_them(make_on_standby, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    sandbox, asked = collecting(make_on_standby, "deadline", monkeypatch)
    ran = agent(sandbox, "echo before > f.txt; sleep 60", timeout=2)
    assert ran.exit_code is None and sandbox.frozen
    sandbox.copy_out(WORKSPACE, tmp_path / "out", **CAPS)
    assert asked == [WORKSPACE] and (tmp_path / "out" / "f.txt").read_text() == "before\n"


def test_anything_run_after_the_agent_makes_its_archives_stale(make_on_standby, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    sandbox, asked = collecting(make_on_standby, "stale", monkeypatch)
    assert agent(sandbox, "echo agent > f.txt").exit_code == 0
    assert sandbox.exec(["sh", "-c", "echo hook > /workspace/f.txt"], timeout=30).ok  # e.g. a container hook
    sandbox.copy_out(WORKSPACE, tmp_path / "out", **CAPS)
    assert asked == [WORKSPACE] and (tmp_path / "out" / "f.txt").read_text() == "hook\n"


def test_a_mount_inside_the_workspace_comes_out_as_in_dockers_copy(make_on_standby, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    """The project's skills are bind-mounted at /workspace/.claude/skills: both copies hold them."""
    skills = tmp_path / "skills"
    (skills / "s").mkdir(parents=True)
    (skills / "s" / "SKILL.md").write_text("a skill\n")
    for path in (tmp_path, skills, skills / "s"):
        path.chmod(0o755)
    (skills / "s" / "SKILL.md").chmod(0o644)
    sandbox, asked = collecting(make_on_standby, "mounted", monkeypatch,
                                mounts=(BindMount(skills, "/workspace/.claude/skills"),))
    assert agent(sandbox, "echo out > out.txt").exit_code == 0
    launcher = sandbox.copy_out(WORKSPACE, tmp_path / "launcher", **CAPS)
    assert asked == []
    docker = sandbox.copy_out(WORKSPACE, tmp_path / "docker", **CAPS)
    assert asked == [WORKSPACE]
    assert tree(tmp_path / "launcher") == tree(tmp_path / "docker")
    assert summary(launcher) == summary(docker) and (tmp_path / "launcher" / "out.txt").read_text() == "out\n"


# Lowers the launcher's threads to SCHED_IDLE (the sandbox user may) and keeps the CPU busy for 3 s.
STARVE = """
import os, subprocess, sys
main_too = sys.argv[1] == "all"
for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    try:
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
    except OSError:
        continue
    if b"/opt/agent-eval/run_agent.py" in args:
        for tid in os.listdir(f"/proc/{pid}/task"):
            if main_too or tid != pid:
                os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
for _ in range(8):
    subprocess.Popen(["timeout", "3", "sh", "-c", "while :; do :; done"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


@pytest.mark.parametrize("threads", ["all-but-main", "all"])
def test_a_starved_launcher_loses_none_of_the_agents_output(make_on_standby, threads: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    """Found by the red team: with the thread that relayed the agent's output starved, what the agent
    wrote just before it exited was still in the pipe when the launcher gave up on it after 0.3 s:
    the end of the conversation vanished from the stream, the case an `exited` 0 with no result."""
    sandbox, asked = collecting(make_on_standby, f"starved-{threads}", monkeypatch)
    sandbox.copy_in_files({"starve.py": STARVE.encode()}, WORKSPACE)
    ran = agent(sandbox, f"python3 starve.py {threads} && for i in $(seq 1 2000); do echo line $i; done")
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout == "".join(f"line {i}\n" for i in range(1, 2001)).encode()
    sandbox.copy_out(WORKSPACE, tmp_path / "out", **CAPS)
    assert asked == [] and (tmp_path / "out" / "starve.py").is_file()


@pytest.mark.parametrize("leaves", ["head -c 9000000 /dev/zero > big.bin", "mkdir d && cd d && seq 1 301 | xargs touch"])
def test_a_big_tree_is_left_to_docker(make_on_standby, leaves: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Past 8 MiB or 300 entries Docker's archive API is the quicker copy: the launcher stops."""
    sandbox, asked = collecting(make_on_standby, "big", monkeypatch)
    assert agent(sandbox, leaves).exit_code == 0
    report = sandbox.copy_out(WORKSPACE, tmp_path / "out", **CAPS)
    assert asked == [WORKSPACE]
    assert report.bytes == 9_000_000 or report.files == 301
