"""The per-case request log: one JSON line per request the gateway saw.

Whatever the container sent is logged, but never a credential: headers that
carry one are redacted, and every line is scrubbed of the host's secrets
before it is written, so a key can reach the file by no path.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
PREVIEW_BYTES = 1024
SENSITIVE_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie", "set-cookie"})


def redact_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name: REDACTED if name.lower() in SENSITIVE_HEADERS else value for name, value in headers}


def secret_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """Each secret as it may appear in a written line: as is, and JSON-escaped."""
    return tuple({form for s in secrets if s for form in (s, json.dumps(s)[1:-1])})


def scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def parse_body(raw: bytes, *, limit: int | None = None) -> Any:
    """A body as it should appear in the log: JSON if it is JSON, else text.

    Over `limit` bytes only its size and the start are kept: a refused request
    must not let the sandbox write megabytes into the host's run directory.
    """
    if not raw:
        return None
    if limit is not None and len(raw) > limit:
        return {"bytes": len(raw), "preview": raw[:PREVIEW_BYTES].decode("utf-8", "replace")}
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"unparsed": raw.decode("utf-8", "replace")}


Outcome = Literal[
    "forwarded",  # relayed to the upstream (whatever status it answered)
    "local",  # a connectivity probe the gateway answered itself
    "over_budget",  # refused: what is left of the case's budget cannot cover the request's worst case
    "forbidden",  # refused: not a model endpoint
    "policy_refused",  # refused: a model, tool or feature the eval does not allow (policy.py)
    "too_many_requests",  # refused: the case has too many requests in flight
    "too_many_connections",  # a connection over the case's cap, closed unserved
    "hook_model",  # not a request: a hook-model call the broker made, charged to the case
    "upstream_error",  # the upstream could not be reached, or its stream broke off
    "client_disconnected",
    "bad_request",  # the body could not be read
    "channel_closed",
    "internal_error",
]


class LogRecord(BaseModel):
    time: str
    case_id: str
    method: str
    path: str
    status: int | None
    outcome: Outcome
    duration_ms: int
    request_headers: dict[str, str]
    request: Any = None
    response: Any = None
    model: str | None = None
    usage: dict[str, int] | None = None
    cost_usd: float = 0.0
    spent_usd: float = 0.0
    reserved_usd: float | None = None  # what the request held of the budget while in flight
    max_tokens_lowered_from: int | None = None  # the request's own max_tokens, when the gateway lowered it
    betas_dropped: list[str] | None = None  # anthropic-beta values not passed on
    refused: bool = False
    price_note: str | None = None
    charge_note: str | None = None  # how a response without final usage was charged
    error: str | None = None


# Past this many bytes a case's log keeps each request's metadata, not its bodies:
# what a case sends must not fill the host's disk.
DEFAULT_MAX_LOG_BYTES = 256 * 1024 * 1024
# Metadata lines are small but not bounded in number: past this much more, they are only counted.
METADATA_ALLOWANCE_BYTES = 16 * 1024 * 1024


def _json_line(record: LogRecord) -> str:
    # Not model_dump_json: it refuses lone surrogates, which a request body may carry.
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


class RequestLog:
    """Append-only JSONL file, safe to write from many handler threads."""

    def __init__(self, path: Path, secrets: Iterable[str] = (), *, max_bytes: int = DEFAULT_MAX_LOG_BYTES,
                 metadata_allowance: int = METADATA_ALLOWANCE_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.hard_max_bytes = max_bytes + metadata_allowance
        self._written = 0
        self._dropped = 0
        self._last: LogRecord | None = None
        # The JSON-escaped spelling too: that is how a secret would appear in a line.
        self._secrets = secret_forms(secrets)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A body may hold "\udcff" escapes (lone surrogates once parsed): they are written back as
        # the same escapes rather than making the record, and the request, vanish.
        self._file = open(path, "a", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()

    def write(self, record: LogRecord) -> None:
        line = scrub(_json_line(record), self._secrets)
        if self._written + len(line) > self.max_bytes:
            stripped = record.model_copy(update={"request": None, "response": None,
                                                 "error": (record.error or "") + " [bodies not logged: log size cap]"})
            line = scrub(_json_line(stripped), self._secrets)
        with self._lock:
            if self._file.closed:
                # A request still finishing after its channel closed: the case
                # is over and its log handed on; dropping is the lesser harm.
                log.warning("request log %s closed; dropped a record of %s %s", self.path, record.method, record.path)
                return
            if self._written + len(line) > self.hard_max_bytes:
                self._dropped += 1
                self._last = record
                return
            self._file.write(line + "\n")
            self._file.flush()
            self._written += len(line) + 1

    @property
    def dropped(self) -> int:
        with self._lock:
            return self._dropped

    def close(self) -> None:
        """Close the file; past the hard cap, its last line says how many records were not written."""
        with self._lock:
            if self._dropped and self._last is not None and not self._file.closed:
                note = (f"{self._dropped} record(s) not written: the log reached its cap of "
                        f"{self.hard_max_bytes} bytes; this is the last of them, without bodies")
                last = self._last.model_copy(update={"request": None, "response": None, "error": note})
                self._file.write(scrub(last.model_dump_json(), self._secrets) + "\n")
            self._file.close()
