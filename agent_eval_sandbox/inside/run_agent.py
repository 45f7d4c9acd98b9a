"""Launch the agent inside the sandbox: gateway forwarder first, then `claude -p`.

Standard library only (the image's python3). The host runs it with `docker
exec` as the sandbox user, under the execute-only interpreter:

    /usr/bin/python3-agent-eval -I /opt/agent-eval/run_agent.py --gateway-socket /run/agent-eval/gateway.sock \
        --port 8080 --prompt-file /run/agent-eval/prompt.txt -- claude -p ...

The CLI's stdout/stderr are the launcher's own (the host streams them to the
run directory); the exit code is the CLI's (128+n when a signal ended it).
When the go line asks it to collect files as the agent exits, the CLI's stdout
is a pipe the launcher relays, framed (exit_archive.py).
On standby (`run_agent.py --standby`, see standby.py) it is started before its
case and reads the rest of its command, environment and directory from stdin.

Exit 125 means the launcher itself could not start the agent; exit 124 that
the model gateway's socket took no connection, so the agent was not started
(the host checks that against its own record before calling it the tool's
failure).

Before it starts anything it stacks the sandbox's seccomp filter (confine.py:
no io_uring, no vsock), which every process of the agent inherits.

The launcher holds the stream the host reads the conversation from, so it
makes itself non-dumpable before anything of the agent runs: the agent's
tools run as the same user, and a dumpable launcher's `/proc/<pid>/fd/1`
would let them write lines of their own into that stream. If that cannot be
done, the agent does not start.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading

# Not typing's: the launcher starts in the sandbox, on its case's CPU (tests/unit/sandbox/test_inside_imports.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

# -I leaves this file's directory off sys.path; forwarder.py and standby.py live next to it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import confine  # noqa: E402
import exit_archive  # noqa: E402
import forwarder  # noqa: E402
import standby as standby_  # noqa: E402

LAUNCH_FAILED = 125
GATEWAY_UNREACHABLE = 124
# Generous: on a loaded host a thread may wait seconds for its first time slice.
READY_TIMEOUT_S = 30.0
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def make_non_dumpable() -> str | None:
    """None once the process is non-dumpable, else why it could not be made so."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return os.strerror(ctypes.get_errno())
        if libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
            return "the kernel still reports the process as dumpable"
    except (OSError, AttributeError) as exc:
        return str(exc)
    return None


def _start_forwarder(port: int, socket_path: str) -> bool:
    ready = threading.Event()
    thread = threading.Thread(
        target=forwarder.forward,
        args=(("127.0.0.1", port), socket_path),
        kwargs={"announce": False, "on_ready": ready.set},
        daemon=True,
    )
    thread.start()
    # Woken the moment it listens; the short waits only notice a thread that died first.
    for _ in range(int(READY_TIMEOUT_S / 0.05)):
        if ready.wait(0.05):
            return True
        if not thread.is_alive():
            return False
    return False


def main(argv: list[str] | None = None, collect: exit_archive.Collect | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gateway-socket", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--prompt-file", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("run_agent: no agent command given", file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    problem = make_non_dumpable()
    if problem is not None:
        print(f"run_agent: cannot make the launcher non-dumpable ({problem}); not starting the agent",
              file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    # Before any thread starts, so that the forwarder's and every process of the agent's carry it.
    problem = confine.apply()
    if problem is not None:
        print(f"run_agent: cannot install the sandbox's seccomp filter ({problem}); not starting the agent",
              file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    # Our own session: the host can signal the whole agent process tree at once.
    try:
        os.setsid()
    except OSError:
        pass
    if not _start_forwarder(args.port, args.gateway_socket):
        print("run_agent: the gateway forwarder did not start", file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    # The CLI gives up on a gateway that resets it after two retries: make sure it is there first.
    try:
        forwarder.connect_unix(args.gateway_socket).close()
    except OSError as exc:
        print(f"run_agent: the model gateway is not reachable at {args.gateway_socket}: {exc}",
              file=sys.stderr, flush=True)
        return GATEWAY_UNREACHABLE
    # The prompt is the child's stdin; the launcher's own copy is closed once the child has started (or failed to).
    with contextlib.ExitStack() as stack:
        try:
            prompt = stack.enter_context(open(args.prompt_file, "rb"))
        except OSError as exc:
            print(f"run_agent: cannot read the prompt: {exc}", file=sys.stderr, flush=True)
            return LAUNCH_FAILED
        try:
            # When it collects, the launcher's stdout is its own (framed) and the agent's a pipe it relays.
            child = subprocess.Popen(command, stdin=prompt, stdout=subprocess.PIPE if collect else None)
        except OSError as exc:
            print(f"run_agent: cannot start {command[0]}: {exc}", file=sys.stderr, flush=True)
            return LAUNCH_FAILED
    return _wait_for(child, collect)


def _wait_for(child: subprocess.Popen[bytes], collect: exit_archive.Collect | None) -> int:
    """The agent's exit code, once it has exited and, if asked, its files are archived after its output."""

    def pass_on(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    if collect is not None and child.stdout is not None:
        out = exit_archive.FramedOutput(sys.stdout.fileno())
        exit_archive.relay_until_exit(child.pid, child.stdout.fileno(), out, lambda: child.poll() is not None)
        code = child.wait()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)  # from here a signal is for the launcher itself
        exit_archive.archive_all(collect, out)
    else:
        code = child.wait()
    return 128 - code if code < 0 else code


def standby(stdin: BinaryIO) -> int:
    """Wait for the go line on `stdin`, then run as `main` would with its argv, environment and directory."""
    problem = make_non_dumpable()  # before the go line is read: only the controller may write it
    if problem is not None:
        print(f"run_agent: cannot make the launcher non-dumpable ({problem}); not starting the agent",
              file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    # The files that come with the go line and the archives at the agent's exit are tars: imported
    # while it waits, not on its case's way.
    import tarfile  # noqa: F401
    try:
        go = standby_.read(stdin)
    except (standby_.GoLineError, OSError) as exc:
        print(f"run_agent: {exc}; not starting the agent", file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    if go is None:
        # Its case never started an agent here (the sandbox is being removed), or the stream from the
        # controller broke: either way nothing ran, and an exit of 0 must never say otherwise.
        print("run_agent: the launcher's input ended before its go line; not starting the agent",
              file=sys.stderr, flush=True)
        return LAUNCH_FAILED
    for archive in go.archives:
        try:
            standby_.unpack(stdin, archive)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the agent must not start on half its files
            print(f"run_agent: cannot copy files into {archive.dest}: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            return LAUNCH_FAILED
    os.environ.update(go.env)
    if go.cwd:
        try:
            os.chdir(go.cwd)
        except OSError as exc:
            print(f"run_agent: cannot enter {go.cwd}: {exc}", file=sys.stderr, flush=True)
            return LAUNCH_FAILED
    collect: exit_archive.Collect | None = None
    if go.collect is not None:
        try:
            collect = exit_archive.Collect.from_json(go.collect)
        except ValueError as exc:
            print(f"run_agent: the go line's collect is {exc}; not starting the agent", file=sys.stderr, flush=True)
            return LAUNCH_FAILED
    return main(go.argv, collect)


if __name__ == "__main__":
    code = standby(sys.stdin.buffer) if sys.argv[1:] == [standby_.FLAG] else main()
    # Everything it had to say is written: its exit code is the exec's end, which its case waits
    # for, so it skips the interpreter's teardown (~7 ms under the sandbox's CPU limit).
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a host no longer reading has nothing more to learn
            stream.flush()
    os._exit(code)
