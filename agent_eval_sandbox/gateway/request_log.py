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
    "over_budget",  # refused: the case's budget is spent
    "forbidden",  # refused: not a model endpoint
    "too_many_requests",  # refused: the case has too many requests in flight
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
    refused: bool = False
    price_note: str | None = None
    error: str | None = None


# Past this many bytes a case's log keeps each request's metadata, not its bodies:
# what a case sends must not fill the host's disk.
DEFAULT_MAX_LOG_BYTES = 256 * 1024 * 1024


def _json_line(record: LogRecord) -> str:
    # Not model_dump_json: it refuses lone surrogates, which a request body may carry.
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


class RequestLog:
    """Append-only JSONL file, safe to write from many handler threads."""

    def __init__(self, path: Path, secrets: Iterable[str] = (), *, max_bytes: int = DEFAULT_MAX_LOG_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._written = 0
        # The JSON-escaped spelling too: that is how a secret would appear in a line.
        self._secrets = tuple({form for s in secrets if s for form in (s, json.dumps(s)[1:-1])})
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
            self._file.write(line + "\n")
            self._file.flush()
            self._written += len(line) + 1

    def close(self) -> None:
        with self._lock:
            self._file.close()
