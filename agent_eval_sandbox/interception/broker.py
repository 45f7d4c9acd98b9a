"""The host-side hook broker: one per case, on a unix socket the container reaches read-only.

The in-container hook client sends each PreToolUse event here and prints what
comes back. The broker holds everything the decision needs — the handlers,
the case's input.yaml and answers.yaml, the environment the host configured
for the case — none of which enters the container, and it appends every
decision to `cases/<id>/tool_decisions.jsonl` itself: the agent can neither
read the policy nor forge the record of what it decided.

Wire protocol (one request per connection, the client half-closes after it):

    client -> broker:  b"agent-eval-hook/1\\n" + the hook's stdin (the event JSON)
    broker -> client:  {"decision": "allow"|"deny"|"pass", "reason": "...", "hook_output": {...}|null}

Requests are bounded in size, in the time to arrive and in how many are
served at once (a connection over the cap is closed before a thread exists
for it); whatever is wrong with one (too big, too slow, not JSON, not an
event, a bug of ours) is a logged deny. A question reaches the broker twice
(the managed gate hook, then the answering hook): the second time it gets the
first answer, so the hook model is asked, and the decision logged, once.

The socket is reachable by the agent's own tools, so every event may be
forged: the hook model is asked at most `max_llm_calls` times a case (each
call paid from the case's budget, see answerer.MeteredAnswerer), questions
and records are size-capped (decision.py, decision_log.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import socket
import socketserver
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval_sandbox.cpu_share import CpuShare
from agent_eval_sandbox.interception.decision import (
    Answerer,
    AnswerRequest,
    CaseContext,
    Decision,
    MalformedEvent,
    ToolEvent,
    decide,
    deny,
)
from agent_eval_sandbox.interception.decision_log import DecisionLog
from agent_eval_sandbox.interception.handlers import (
    ASK_USER_QUESTION,
    ToolHandlers,
)
from agent_eval_sandbox.unix_socket import LOGGED_REFUSED_CONNECTIONS, CappedUnixServer, UnixSocketService

log = logging.getLogger(__name__)

PROTOCOL_LINE = b"agent-eval-hook/1\n"
_PREVIEW_BYTES = 2048
_REMEMBERED_QUESTIONS = 64
_DRAIN_S = 1.0
# Distinct warnings a case may print on the controller's terminal.
MAX_WARNINGS = 20

# (request, timeout_s) -> the hook model's raw reply; see answerer.AnthropicAnswerer.
TimedAnswerer = Callable[[AnswerRequest, float], str]


@dataclass(frozen=True)
class BrokerLimits:
    # Write/Edit events carry the whole file content.
    max_request_bytes: int = 16 * 1024 * 1024
    read_timeout_s: float = 10.0
    # Connections open at once; more are closed unserved (their hook client denies).
    max_connections: int = 32
    # For one AskUserQuestion call (all its questions): under the client's
    # 110 s and the hook's 120 s, so a slow model degrades to the fallback.
    answer_budget_s: float = 90.0
    llm_timeout_s: float = 30.0
    # Per case: the agent can reach the socket, and each call runs on the host's
    # credentials (and is charged to the case's budget). A real case asks a few questions.
    max_llm_calls: int = 20


class RequestError(Exception):
    """A request the broker refuses before it is an event (size, time, protocol)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def decision_record(
    case_id: str,
    event: ToolEvent,
    decision: Decision,
    *,
    at: str,
    duration_ms: int,
) -> dict[str, Any]:
    """One line of tool_decisions.jsonl."""
    handler = (
        {"index": decision.handler_index, "match": decision.handler_match}
        if decision.handler_index is not None
        else None
    )
    return {
        "time": at,
        "case_id": case_id,
        "tool_name": event.tool_name,
        "tool_use_id": event.tool_use_id,
        "tool_input": event.tool_input,
        "session_id": event.session_id,
        "decision": decision.kind,
        "reason": decision.reason,
        "handler": handler,
        "answers": {a.question: a.answer for a in decision.answers} if decision.answers else None,
        "answer_details": [a.record() for a in decision.answers] or None,
        "warnings": list(decision.warnings) or None,
        "error": None,
        "duration_ms": duration_ms,
    }


def refusal_record(case_id: str, error: str, raw: bytes, *, at: str, duration_ms: int) -> dict[str, Any]:
    """The line for a request that never became an event: same keys, plus what arrived."""
    return {
        "time": at,
        "case_id": case_id,
        "tool_name": None,
        "tool_use_id": None,
        "tool_input": None,
        "session_id": None,
        "decision": "deny",
        "reason": error,
        "handler": None,
        "answers": None,
        "answer_details": None,
        "warnings": None,
        "error": error,
        "duration_ms": duration_ms,
        "request_bytes": len(raw),
        "request_preview": raw[:_PREVIEW_BYTES].decode("utf-8", "replace"),
    }


def response(decision: Decision) -> dict[str, Any]:
    return {"decision": decision.kind, "reason": decision.reason, "hook_output": decision.hook_output()}


def read_request(sock: Any, limits: BrokerLimits) -> bytes:
    """The event bytes after the protocol line, read to EOF within the limits."""
    deadline = time.monotonic() + limits.read_timeout_s
    received = bytearray()
    cap = limits.max_request_bytes + len(PROTOCOL_LINE)
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise RequestError(f"the request did not arrive within {limits.read_timeout_s:g} s") from None
        if not chunk:
            break
        received += chunk
        if len(received) > cap:
            raise RequestError(f"the request is larger than {limits.max_request_bytes} bytes")
    if not received.startswith(PROTOCOL_LINE):
        raise RequestError("not an agent-eval hook request (the protocol line is missing)")
    return bytes(received[len(PROTOCOL_LINE):])


class _Handler(socketserver.BaseRequestHandler):
    server: CappedUnixServer[Broker]

    def handle(self) -> None:
        broker = self.server.service
        started = time.monotonic()
        with broker.request_in_flight():
            try:
                # Reading and parsing a request is the controller's CPU: the case's share of it (the
                # eval's own handlers, which decide after, are not the case's doing).
                with broker.charged():
                    raw = read_request(self.request, broker.limits)
                    event = broker.event_of(raw)
            except RequestError as exc:
                reply = broker.refuse(str(exc), b"", started)
            except OSError as exc:
                reply = broker.refuse(f"the request could not be read: {exc}", b"", started)
            else:
                reply = broker.respond(raw, started, event)
            self._send(reply)

    def _send(self, reply: Mapping[str, Any]) -> None:
        sock = self.request
        try:
            sock.settimeout(self.server.service.limits.read_timeout_s)
            sock.sendall(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            # A refused request may still be arriving: closing on unread data would
            # reset the connection and the client would lose the reason. Drain briefly.
            deadline = time.monotonic() + _DRAIN_S
            while (remaining := deadline - time.monotonic()) > 0:
                sock.settimeout(remaining)
                if not sock.recv(65536):
                    break
        except OSError:
            log.debug("hook broker: the client went away before the answer", exc_info=True)


def _warn_on_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


class Broker(UnixSocketService):
    """One case's hook broker.

        with Broker(case.id, run_sock_dir / "broker.sock", handlers, CaseContext.from_case_dir(case.dir),
                    case_env, case_dir / "tool_decisions.jsonl",
                    answerer=AnthropicAnswerer(hook_model_env)) as broker:
            ...  # run the case with the socket's directory mounted at /run/agent-eval (read-only)

    close() waits for the requests in flight (up to `close_grace_s`), then drops
    idle connections and removes the socket.
    """

    handler = _Handler

    def __init__(
        self,
        case_id: str,
        socket_path: Path | str,
        handlers: ToolHandlers,
        case: CaseContext,
        env: Mapping[str, str],
        log_path: Path | str,
        *,
        answerer: TimedAnswerer | None,
        warn: Callable[[str], None] = _warn_on_stderr,
        limits: BrokerLimits | None = None,
    ) -> None:
        self.limits = limits or BrokerLimits()
        super().__init__(Path(socket_path), max_connections=self.limits.max_connections)
        self.what = f"the hook broker of case {case_id}"
        self.cpu_share = CpuShare()
        self.case_id = case_id
        self.handlers = handlers
        self.case = case
        self.env = dict(env)
        self.log_path = Path(log_path)
        self._answerer = answerer
        self._warn = warn
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._llm_calls = 0
        # A question's first answer, for the second hook that asks about the same call.
        self._answered: OrderedDict[tuple[str, str], Decision] = OrderedDict()
        self._ask_lock = threading.Lock()
        self._log: DecisionLog | None = None

    @property
    def thread_name(self) -> str:
        return f"broker-{self.case_id}"

    def _started(self, server: socketserver.BaseServer) -> None:
        self._log = DecisionLog(self.log_path)

    def _stopped(self, server: socketserver.BaseServer) -> None:
        super()._stopped(server)
        refused = self.connections_refused
        if refused > LOGGED_REFUSED_CONNECTIONS:
            self._write(refusal_record(self.case_id, f"hook broker refused {refused} connections in all over the cap "
                                       f"of {self.limits.max_connections}", b"", at=_now(), duration_ms=0))
        if self._log is not None:
            self._log.close()

    def _write(self, record: Mapping[str, Any]) -> None:
        if self._log is not None:
            self._log.write(record)

    def _emit(self, warnings: tuple[str, ...]) -> None:
        """Each distinct warning once, and at most MAX_WARNINGS a case: forged events can make
        any number of distinct ones, and they go to the controller's terminal."""
        with self._lock:
            new = [w for w in dict.fromkeys(warnings) if w not in self._warned]
            room = MAX_WARNINGS - len(self._warned)
            shown, silenced = new[:max(room, 0)], len(new) > room >= 0
            self._warned.update(shown)
            if silenced:
                self._warned.add("")  # the room is gone for good: the note below is printed once
        for warning in shown:
            self._warn(f"case {self.case_id}: {warning}")
        if silenced:
            self._warn(f"case {self.case_id}: more than {MAX_WARNINGS} hook warnings; the rest are in "
                       f"{self.log_path.name} only")

    def _refuse_connection(self, request: socket.socket, open_connections: int, *, logged: bool) -> None:
        reason = (f"hook broker refused the connection: {open_connections} are open already "
                  f"(cap {self.limits.max_connections})")
        if logged:
            self._write(refusal_record(self.case_id, reason + "; further refusals are counted, not logged one by one",
                                       b"", at=_now(), duration_ms=0))
        # A fresh connection's send buffer is empty: a short answer goes out
        # without blocking the accepting thread, or not at all (the client then denies).
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(json.dumps(response(deny(reason))).encode() + b"\n")

    def refuse(self, error: str, raw: bytes, started: float) -> dict[str, Any]:
        """Deny a request that is not a decidable event, and log why."""
        reason = f"hook broker refused the request: {error}"
        self._write(refusal_record(self.case_id, reason, raw, at=_now(), duration_ms=_elapsed_ms(started)))
        return response(deny(reason))

    @staticmethod
    def event_of(raw: bytes) -> ToolEvent | str:
        """The hook's event, or why it is not one."""
        try:
            return ToolEvent.from_payload(json.loads(raw))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and MalformedEvent are ValueErrors
            return str(exc) if isinstance(exc, MalformedEvent) else f"the hook input is not JSON ({exc})"

    def respond(self, raw: bytes, started: float, event: ToolEvent | str) -> dict[str, Any]:
        """The reply to `event` (`event_of(raw)`: a string says why it is not one)."""
        at = _now()
        if isinstance(event, str):
            return self.refuse(event, raw, started)
        try:
            decision, fresh = self._decide(event)
        except Exception as exc:  # a bug of ours must deny, never allow
            log.exception("hook broker: case %s: deciding %s failed", self.case_id, event.tool_name)
            decision, fresh = deny(f"hook broker error: {type(exc).__name__}: {exc}"), True
        if fresh:
            self._emit(decision.warnings)
            record = decision_record(self.case_id, event, decision, at=at, duration_ms=_elapsed_ms(started))
            self._write(record)
        return response(decision)

    def _decide(self, event: ToolEvent) -> tuple[Decision, bool]:
        """The decision, and whether it is new (False: a question answered before)."""
        # The budget starts now: waiting for another question's answer spends it too.
        answerer = self._budgeted_answerer()
        if event.tool_name != ASK_USER_QUESTION or event.tool_use_id is None:
            return decide(event, self.handlers, self.case, self.env, answerer), True
        # A digest: the key must not hold a copy of what may be megabytes of questions.
        questions = json.dumps(event.tool_input.get("questions"), sort_keys=True, default=str)
        key = (event.tool_use_id, hashlib.sha256(questions.encode("utf-8", "replace")).hexdigest())
        with self._ask_lock:
            known = self._answered.get(key)
            if known is not None:
                return known, False
            decision = decide(event, self.handlers, self.case, self.env, answerer)
            self._answered[key] = decision
            while len(self._answered) > _REMEMBERED_QUESTIONS:
                self._answered.popitem(last=False)
            return decision, True

    def _budgeted_answerer(self) -> Answerer | None:
        """The answerer for one call: bounded by the call's time budget and the case's call cap."""
        answerer = self._answerer
        if answerer is None:
            return None
        deadline = time.monotonic() + self.limits.answer_budget_s

        def answer(request: AnswerRequest) -> str:
            remaining = deadline - time.monotonic()
            if remaining < 1.0:
                raise TimeoutError(f"the {self.limits.answer_budget_s:g} s answer budget of this call is spent")
            with self._lock:
                if self._llm_calls >= self.limits.max_llm_calls:
                    raise RuntimeError(f"the case's cap of {self.limits.max_llm_calls} hook-model calls is reached")
                self._llm_calls += 1
            return answerer(request, min(self.limits.llm_timeout_s, remaining))

        return answer


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
