"""The launcher on standby: the go-line protocol, and the real launcher script run on the host.

The script is standard library only, so the host's python3 runs it as the
sandbox's does; the gateway socket is a unix listener of the test's own.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import standby
from tests.accepting_socket import accepting_unix_socket

LAUNCHER = Path(standby.__file__).with_name("run_agent.py")


# ---- the go line ---------------------------------------------------------------------


def test_a_go_line_reads_back_as_written():
    line = standby.encode(["--port", "8080", "--", "claude", "-p", "ünïcode\nnewline"], {"A": "1"}, "/workspace")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    go = standby.read(io.BytesIO(line + b"ignored after the line"))
    assert go == standby.Go(["--port", "8080", "--", "claude", "-p", "ünïcode\nnewline"], {"A": "1"}, "/workspace")
    with_files = standby.encode([], {}, None, [standby.Archive("/workspace", 10240), standby.Archive("/x", 0)])
    assert standby.read(io.BytesIO(with_files)).archives == [standby.Archive("/workspace", 10240),
                                                             standby.Archive("/x", 0)]


def test_end_of_input_is_no_go():
    assert standby.read(io.BytesIO(b"")) is None


@pytest.mark.parametrize(("line", "problem"), [
    (b"not json\n", "not JSON"),
    (b'["argv"]\n', "not a JSON object"),
    (b'{"argv": "claude", "env": {}}\n', "argv is not a list"),
    (b'{"argv": ["a", 1], "env": {}}\n', "argv is not a list"),
    (b'{"argv": [], "env": {"A": 1}}\n', "env is not a mapping"),
    (b'{"argv": [], "env": {}, "cwd": 7}\n', "cwd is not a string"),
    (b'{"argv": [], "env": {}}', "ended before its newline"),
    (b'{"argv": [], "env": {}, "archives": {}}\n', "archives are not a list"),
    (b'{"argv": [], "env": {}, "archives": [{"dest": "rel", "size": 1}]}\n', "archives are not a list"),
    (b'{"argv": [], "env": {}, "archives": [{"dest": "/w", "size": -1}]}\n', "archives are not a list"),
    (b'{"argv": [], "env": {}, "archives": [{"dest": "/w", "size": true}]}\n', "archives are not a list"),
])
def test_a_bad_go_line_says_what_is_wrong(line: bytes, problem: str):
    with pytest.raises(standby.GoLineError, match=problem):
        standby.read(io.BytesIO(line))


def test_a_go_line_has_a_size_limit_both_ways():
    with pytest.raises(standby.GoLineError, match="longer than"):
        standby.read(io.BytesIO(b"x" * (standby.MAX_LINE_BYTES + 10) + b"\n"))
    with pytest.raises(standby.GoLineError, match="more than"):
        standby.encode(["x" * standby.MAX_LINE_BYTES], {}, None)


# ---- the launcher script on standby --------------------------------------------------------


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Path]:
    with accepting_unix_socket(tmp_path / "gw.sock") as path:
        yield path


def on_standby(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-I", str(LAUNCHER), standby.FLAG], input=stdin, capture_output=True,
                          timeout=60, env={"PATH": os.environ["PATH"], "KEPT": "from-the-start"})


def launcher_args(gateway: Path, prompt: Path, *command: str) -> list[str]:
    return ["--gateway-socket", str(gateway), "--port", "0", "--prompt-file", str(prompt), "--", *command]


def test_the_go_line_gives_the_command_its_environment_and_directory(gateway: Path, tmp_path: Path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("the prompt")
    work = tmp_path / "work"
    work.mkdir()
    report = 'echo "$KEPT $FOO $(pwd) $(cat)"; exit 7'
    go = standby.encode(launcher_args(gateway, prompt, "sh", "-c", report), {"FOO": "from-the-go-line"}, str(work))
    done = on_standby(go)
    assert done.returncode == 7, done.stderr
    assert done.stdout.decode() == f"from-the-start from-the-go-line {work} the prompt\n"


def test_no_go_line_starts_nothing_and_is_no_success(tmp_path: Path):
    """Its input closed unused, or the stream from the controller broke: never an exit 0 for nothing done."""
    done = on_standby(b"")
    assert (done.returncode, done.stdout) == (125, b"")
    assert done.stderr == b"run_agent: the launcher's input ended before its go line; not starting the agent\n"


@pytest.mark.parametrize("line", [b"garbage\n", b'{"argv": [], "env": {}}'])
def test_a_bad_go_line_starts_nothing_and_says_why(line: bytes):
    done = on_standby(line)
    assert done.returncode == 125 and done.stdout == b""
    assert done.stderr.decode().startswith("run_agent: the go line") and done.stderr.count(b"\n") == 1


def test_a_directory_that_is_not_there_starts_nothing(gateway: Path, tmp_path: Path):
    marker = tmp_path / "ran"
    go = standby.encode(launcher_args(gateway, tmp_path / "p", "touch", str(marker)), {}, str(tmp_path / "missing"))
    done = on_standby(go)
    assert done.returncode == 125 and b"cannot enter" in done.stderr and not marker.exists()


def tar_of(files: dict[str, bytes], mode: int = 0o640) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_the_files_after_the_go_line_are_in_place_before_the_command_starts(gateway: Path, tmp_path: Path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("")
    work = tmp_path / "work"  # not there yet: made for the archive
    first, second = tar_of({"a.txt": b"one", "sub/b.txt": b"two"}), tar_of({"a.txt": b"three"}, mode=0o600)
    go = standby.encode(launcher_args(gateway, prompt, "sh", "-c", "cat a.txt sub/b.txt"), {}, str(work),
                        [standby.Archive(str(work), len(first)), standby.Archive(str(work), len(second))])
    done = on_standby(go + first + second + b"never read")
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"threetwo"  # in order: the second archive's a.txt over the first's
    assert (work / "a.txt").stat().st_mode & 0o777 == 0o600 and (work / "sub" / "b.txt").stat().st_mtime == 1_700_000_000


def test_files_cut_short_start_nothing(gateway: Path, tmp_path: Path):
    marker = tmp_path / "ran"
    files = tar_of({"a.txt": b"x" * 5000})
    go = standby.encode(launcher_args(gateway, tmp_path / "p", "touch", str(marker)), {}, None,
                        [standby.Archive(str(tmp_path / "work"), len(files))])
    done = on_standby(go + files[:1000])
    assert done.returncode == 125 and not marker.exists()
    assert done.stderr.decode().startswith(f"run_agent: cannot copy files into {tmp_path / 'work'}")


def test_the_launcher_on_standby_reads_only_its_first_line(gateway: Path, tmp_path: Path):
    """What follows the go line (a second one) is never acted on."""
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("")
    first = standby.encode(launcher_args(gateway, prompt, "sh", "-c", "echo first"), {}, None)
    second = standby.encode(launcher_args(gateway, prompt, "sh", "-c", "echo second"), {}, None)
    done = on_standby(first + second)
    assert done.returncode == 0 and done.stdout == b"first\n"
