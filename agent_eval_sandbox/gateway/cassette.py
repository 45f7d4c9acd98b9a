"""Cassettes: a case's model exchanges as the gateway forwarded them, to replay offline (docs/cassettes.md).

A cassette is JSON Lines: a header, one line per exchange the gateway sent
upstream (the request body as forwarded; the response's status, a few
headers and its body exactly as passed on to the client — a stream's SSE
bytes —; timing), and an end line. An exchange is written when its response
is over, so lines are in the order responses ended; `seq` is the order the
requests arrived in, which is what replay goes by.

Nothing secret is written: the host's credentials and the sandbox's
placeholder key are scrubbed from every line (`request_log.scrub`), and only
an allowlist of headers is kept.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_eval_sandbox import __version__
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.credentials import PLACEHOLDER_API_KEY
from agent_eval_sandbox.gateway.request_log import scrub, secret_forms

FORMAT_VERSION = 1
# Request headers kept: what tells sessions and CLI versions apart. Never an auth header.
KEPT_REQUEST_HEADERS = frozenset({"anthropic-version", "anthropic-beta", "user-agent", "x-app",
                                  "x-claude-code-session-id"})
# Response headers kept: what the client acts on when it is replayed.
KEPT_RESPONSE_HEADERS = frozenset({"content-type", "request-id", "retry-after", "x-should-retry"})
# Past this many bytes a case's cassette stops recording (it says so in its end line):
# what a case sends must not fill the host's disk.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class CassetteError(UserError):
    """A cassette cannot be read."""


class _Line(BaseModel):
    model_config = ConfigDict(extra="allow")


class Header(_Line):
    cassette: int
    case_id: str = ""
    created_at: str = ""
    tool_version: str = ""


class Response(_Line):
    status: int
    headers: list[tuple[str, str]] = Field(default_factory=list)
    body: str = ""  # the bytes passed on to the client, as UTF-8 text (or base64, see `encoding`)
    encoding: str = "utf-8"

    @property
    def content_type(self) -> str:
        return next((v for k, v in self.headers if k.lower() == "content-type"), "")

    @property
    def is_stream(self) -> bool:
        return self.content_type.startswith("text/event-stream")

    def body_bytes(self) -> bytes:
        return base64.b64decode(self.body) if self.encoding == "base64" else self.body.encode("utf-8")


class Entry(_Line):
    seq: int
    at_ms: int = 0  # when the request arrived, after the channel opened
    method: str
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    request: Any = None
    response: Response | None = None  # None: nothing was answered (the client left first)
    outcome: str = "forwarded"
    error: str | None = None
    timing: dict[str, int] = Field(default_factory=dict)  # headers_ms, first_byte_ms, end_ms after arrival


class End(_Line):
    entries: int = 0
    dropped: int = 0  # exchanges not written: the cassette reached its size cap


@dataclass(frozen=True)
class Cassette:
    header: Header
    entries: tuple[Entry, ...]  # in the order the requests arrived
    end: End | None  # None: the recording did not end cleanly (a crash, or still being written)
    source: str = ""

    @property
    def complete(self) -> bool:
        return self.end is not None and self.end.dropped == 0


# ---- writing ---------------------------------------------------------------------------


def _text(body: bytes) -> tuple[str, str]:
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def kept_headers(headers: Iterable[tuple[str, str]], kept: frozenset[str]) -> list[tuple[str, str]]:
    return [(name.lower(), value) for name, value in headers if name.lower() in kept]


class Tape:
    """One exchange being recorded; the relay feeds it what it passes on to the client."""

    def __init__(self, recorder: CassetteRecorder | None, entry: Entry) -> None:
        self._recorder = recorder
        self._entry = entry
        self._started = time.monotonic()
        self._status: int | None = None
        self._headers: list[tuple[str, str]] = []
        self._chunks: list[bytes] = []
        self._finished = False

    def _ms(self) -> int:
        return round((time.monotonic() - self._started) * 1000)

    def respond(self, status: int, headers: Iterable[tuple[str, str]], body: bytes = b"") -> None:
        """The response's status and headers (and its whole body, when it is not streamed)."""
        if self._recorder is None:
            return
        self._status, self._headers = status, kept_headers(headers, KEPT_RESPONSE_HEADERS)
        self._entry.timing["headers_ms"] = self._ms()
        if body:
            self.chunk(body)

    def chunk(self, data: bytes) -> None:
        if self._recorder is None or not data:
            return
        if not self._chunks:
            self._entry.timing["first_byte_ms"] = self._ms()
        self._chunks.append(data)

    def finish(self, outcome: str, error: str | None = None) -> None:
        if self._recorder is None or self._finished:
            return
        self._finished = True
        entry = self._entry
        entry.timing["end_ms"] = self._ms()
        entry.outcome, entry.error = outcome, error
        if self._status is not None:
            body, encoding = _text(self._recorder.scrubbed(b"".join(self._chunks)))
            entry.response = Response(status=self._status, headers=self._headers, body=body, encoding=encoding)
        self._recorder.write(entry)


NO_TAPE = Tape(None, Entry(seq=-1, method="", path=""))


class CassetteRecorder:
    """Writes one case's cassette; safe to use from many handler threads."""

    def __init__(self, path: Path, case_id: str, secrets: Iterable[str] = (), *,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._secrets = secret_forms([*secrets, PLACEHOLDER_API_KEY])
        self._raw_secrets = tuple(s.encode() for s in self._secrets)
        self._lock = threading.Lock()
        self._opened = time.monotonic()
        self._seq = 0
        self._written = 0
        self._entries = 0
        self._dropped = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        # Lone surrogates of a request body are written back as the same escapes.
        self._file = open(path, "w", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115 - closed by close()
        header = Header(cassette=FORMAT_VERSION, case_id=case_id,
                        created_at=datetime.now(UTC).isoformat(timespec="seconds"), tool_version=__version__)
        self._put(header.model_dump(mode="json"))

    def begin(self, method: str, path: str, headers: Iterable[tuple[str, str]], request: Any) -> Tape:
        """A request about to go upstream: its number, its arrival, what it says."""
        with self._lock:
            seq, self._seq = self._seq, self._seq + 1
        entry = Entry(seq=seq, at_ms=round((time.monotonic() - self._opened) * 1000), method=method, path=path,
                      headers=dict(kept_headers(headers, KEPT_REQUEST_HEADERS)), request=request)
        return Tape(self, entry)

    def scrubbed(self, body: bytes) -> bytes:
        for secret in self._raw_secrets:
            body = body.replace(secret, b"[redacted]")
        return body

    def write(self, entry: Entry) -> None:
        line = _json_line(entry.model_dump(mode="json", exclude_none=True))
        with self._lock:
            if self._file.closed or self._written + len(line) > self.max_bytes:
                self._dropped += 1
                return
            self._entries += 1
            self._put_line(line)

    def close(self) -> None:
        with self._lock:
            if self._file.closed:
                return
            self._put(End(entries=self._entries, dropped=self._dropped).model_dump(mode="json"), end=True)
            self._file.close()

    def _put(self, data: dict[str, Any], *, end: bool = False) -> None:
        self._put_line(_json_line({"end": data} if end else data))

    def _put_line(self, line: str) -> None:
        line = scrub(line, self._secrets)
        self._file.write(line + "\n")
        self._file.flush()
        self._written += len(line) + 1


def _json_line(data: Any) -> str:
    # Not pydantic's JSON: it refuses lone surrogates, which a request body may carry.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


# ---- reading ---------------------------------------------------------------------------


def parse_cassette(lines: Sequence[str], source: str = "<cassette>") -> Cassette:
    """A cassette from its lines; a line that is not what it should be is a CassetteError naming it."""
    header: Header | None = None
    entries: list[Entry] = []
    end: End | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise CassetteError(f"{where}: not a JSON line ({exc})",
                                fix="a cassette is JSON Lines; re-record it") from exc
        if not isinstance(data, dict):
            raise CassetteError(f"{where}: a line must be a JSON object", fix="re-record the cassette")
        try:
            if header is None:
                header = Header.model_validate(data)
                if header.cassette != FORMAT_VERSION:
                    raise CassetteError(f"{where}: cassette format {header.cassette} is not supported "
                                        f"(this version reads {FORMAT_VERSION})", fix="re-record it with this version")
            elif "end" in data:
                end = End.model_validate(data["end"])
            else:
                entries.append(Entry.model_validate(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            field_name = ".".join(str(p) for p in first["loc"]) or "line"
            raise CassetteError(f"{where}: {field_name}: {first['msg']}",
                                fix="the file is not a cassette of this tool, or it was edited; re-record it") from exc
    if header is None:
        raise CassetteError(f"{source}: empty cassette", fix="re-record the case with `run --record`")
    entries.sort(key=lambda e: e.seq)
    return Cassette(header, tuple(entries), end, source)


def load_cassette(path: Path) -> Cassette:
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise CassetteError(f"cannot read the cassette {path}: {exc.strerror or exc}",
                            fix="give the cassette.jsonl of a case recorded with `run --record`") from exc
    # Split at newlines only: a JSON string may hold U+2028 and the like, which splitlines() breaks at.
    return parse_cassette(text.split("\n"), str(path))

