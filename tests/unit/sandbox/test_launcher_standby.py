"""The launcher on standby: the go-line protocol, and the real launcher script run on the host.

The script is standard library only, so the host's python3 runs it as the
sandbox's does; the gateway socket is a unix listener of the test's own.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval_sandbox.inside import standby

LAUNCHER = Path(standby.__file__).with_name("run_agent.py")


# ---- the go line ---------------------------------------------------------------------


def test_a_go_line_reads_back_as_written():
    line = standby.encode(["--port", "8080", "--", "claude", "-p", "ünïcode\nnewline"], {"A": "1"}, "/workspace")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    go = standby.read(io.BytesIO(line + b"ignored after the line"))
    assert go == standby.Go(["--port", "8080", "--", "claude", "-p", "ünïcode\nnewline"], {"A": "1"}, "/workspace")


def test_end_of_input_is_no_go():
    assert standby.read(io.BytesIO(b"")) is None


@pytest.mark.parametrize(("line", "problem"), [
    (b"not json\n", "not JSON"),
    (b'["argv"]\n', "argv is not a list"),
    (b'{"argv": "claude", "env": {}}\n', "argv is not a list"),
    (b'{"argv": ["a", 1], "env": {}}\n', "argv is not a list"),
    (b'{"argv": [], "env": {"A": 1}}\n', "env is not a mapping"),
    (b'{"argv": [], "env": {}, "cwd": 7}\n', "cwd is not a string"),
    (b'{"argv": [], "env": {}}', "ended before its newline"),
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
    path = tmp_path / "gw.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield path
    server.close()


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


def test_no_go_line_starts_nothing(tmp_path: Path):
    done = on_standby(b"")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


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


def test_the_launcher_on_standby_reads_only_its_first_line(gateway: Path, tmp_path: Path):
    """What follows the go line (a second one) is never acted on."""
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("")
    first = standby.encode(launcher_args(gateway, prompt, "sh", "-c", "echo first"), {}, None)
    second = standby.encode(launcher_args(gateway, prompt, "sh", "-c", "echo second"), {}, None)
    done = on_standby(first + second)
    assert done.returncode == 0 and done.stdout == b"first\n"
