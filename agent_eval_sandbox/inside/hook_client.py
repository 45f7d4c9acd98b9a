"""The PreToolUse hook inside the sandbox: ask the host's broker, print its decision.

Standard library only (the image's python3); installed root-owned and
read-only at /opt/agent-eval/hook_client.py and run by Claude Code before
every tool call:

    /usr/bin/python3-agent-eval -I /opt/agent-eval/hook_client.py [--socket PATH] [--timeout SECONDS]

It reads the hook event from stdin, sends it to the broker's unix socket
(/run/agent-eval/broker.sock, mounted read-only from the host) and prints the
broker's hook output, if any (in a Kubernetes Pod the broker is reached
through the controller's relay, see controller_link.py). It knows no policy: the handlers and the case's
answers stay on the host.

It fails closed. Whatever goes wrong — no broker, a refused or slow
connection, a garbled answer, a signal, a bug — it denies: the deny JSON on
stdout, the reason on stderr, exit code 2. Claude Code blocks on either the
JSON or the exit code, whereas a hook that merely crashes would let the call
through. (Against SIGKILL, which no process can catch, the hook entry's
`"onFailure": "block"` makes the CLI block too.) A deny from the broker
leaves the same way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

# -I leaves this file's directory off sys.path; controller_link.py lives next to it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import controller_link  # noqa: E402

DEFAULT_SOCKET = "/run/agent-eval/broker.sock"
# Under the hook entry's 120 s timeout: the client answers (denying) before the CLI gives up on it.
DEFAULT_TIMEOUT_S = 110.0
PROTOCOL_LINE = b"agent-eval-hook/1\n"
MAX_REPLY_BYTES = 8 * 1024 * 1024
DENY_EXIT_CODE = 2
DECISIONS = ("allow", "deny", "pass")


class HookFailure(Exception):
    """Anything that keeps the client from relaying a valid broker decision."""


def deny_output(reason: str) -> dict[str, object]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def parse_args(argv: list[str]) -> tuple[str, float]:
    socket_path, timeout = DEFAULT_SOCKET, DEFAULT_TIMEOUT_S
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag not in ("--socket", "--timeout") or not args:
            raise HookFailure(f"bad arguments {argv!r} (usage: hook_client.py [--socket PATH] [--timeout SECONDS])")
        value = args.pop(0)
        if flag == "--socket":
            socket_path = value
        else:
            try:
                timeout = float(value)
            except ValueError:
                raise HookFailure(f"--timeout {value!r} is not a number") from None
            if not timeout > 0:
                raise HookFailure(f"--timeout must be positive, not {value}")
    return socket_path, timeout


def ask_broker(socket_path: str, event: bytes, timeout: float) -> bytes:
    try:
        sock = controller_link.connect(socket_path, timeout)
    except OSError as exc:
        raise HookFailure(f"the tool-interception broker is not reachable at {socket_path} ({exc})") from None
    with sock:
        sock.sendall(PROTOCOL_LINE + event)
        sock.shutdown(socket.SHUT_WR)
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise HookFailure(f"the broker's answer is larger than {MAX_REPLY_BYTES} bytes")
            chunks.append(chunk)
    return b"".join(chunks)


def interpret(reply: bytes) -> tuple[str | None, int, str | None]:
    """(stdout, exit code, stderr) for a broker reply; HookFailure unless it is a coherent decision."""
    try:
        data = json.loads(reply)
    except ValueError:
        raise HookFailure(f"the broker's answer is not JSON: {reply[:200]!r}") from None
    if not isinstance(data, dict) or data.get("decision") not in DECISIONS:
        raise HookFailure(f"the broker's answer has no decision: {reply[:200]!r}")
    decision, output = data["decision"], data.get("hook_output")
    if output is None:
        if decision == "deny":
            raise HookFailure("the broker denied without a hook output")
        return None, 0, None
    specific = output.get("hookSpecificOutput") if isinstance(output, dict) else None
    if (
        decision == "pass"
        or not isinstance(specific, dict)
        or specific.get("permissionDecision") != decision
        or specific.get("hookEventName") != "PreToolUse"
    ):
        raise HookFailure(f"the broker's hook output does not match its decision {decision!r}")
    if decision == "deny":
        reason = specific.get("permissionDecisionReason")
        return json.dumps(output), DENY_EXIT_CODE, reason if isinstance(reason, str) else "denied"
    return json.dumps(output), 0, None


def _on_signal(signum: int, _frame: object) -> None:
    raise HookFailure(f"the hook client was interrupted by signal {signum}")


def run(argv: list[str]) -> tuple[str | None, int, str | None]:
    try:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
            signal.signal(signum, _on_signal)
        socket_path, timeout = parse_args(argv)
        # One clock for everything, stdin included: SIGALRM turns into a deny.
        signal.setitimer(signal.ITIMER_REAL, timeout)
        event = sys.stdin.buffer.read()
        return interpret(ask_broker(socket_path, event, timeout))
    except BaseException as exc:  # fail closed, whatever it was
        detail = str(exc) if isinstance(exc, HookFailure) else f"{type(exc).__name__}: {exc}"
        reason = f"agent-eval hook client: {detail} — the call is denied (fail closed)"
        return json.dumps(deny_output(reason)), DENY_EXIT_CODE, reason
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException:
            pass


def main(argv: list[str]) -> None:
    code = DENY_EXIT_CODE
    try:
        stdout, code, stderr = run(argv)
        if stdout is not None:
            sys.stdout.write(stdout + "\n")
            sys.stdout.flush()
        if stderr is not None:
            sys.stderr.write(stderr + "\n")
            sys.stderr.flush()
    except BaseException:
        code = DENY_EXIT_CODE
    finally:
        # os._exit: no interpreter teardown (or late signal) can change the code.
        os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
