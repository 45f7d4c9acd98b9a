"""`tool_decisions.jsonl`: one bounded line per decision, in a file of bounded size.

What a record holds comes from the sandbox — a Write event carries a whole
file, and anything can send forged events to the broker's socket (measured
before these caps: 40 forged 12 MiB events wrote 480 MiB in 10 s). So:

- every string (and key) longer than MAX_STRING_CHARS is cut, with a visible
  marker and its original length; lists and objects keep MAX_ITEMS entries
  and MAX_DEPTH levels;
- a line still over MAX_RECORD_BYTES keeps only the size of its big fields;
- past MAX_FILE_BYTES in the file, records keep their metadata only (as
  gateway.jsonl does), and past METADATA_ALLOWANCE_BYTES more they are counted,
  not written; the last line then says how many were left out.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

MAX_STRING_CHARS = 8 * 1024
MAX_ITEMS = 256
MAX_DEPTH = 32
MAX_RECORD_BYTES = 256 * 1024
MAX_FILE_BYTES = 64 * 1024 * 1024
METADATA_ALLOWANCE_BYTES = 16 * 1024 * 1024
# The fields that carry what the sandbox sent (the rest is the broker's own metadata).
BODY_FIELDS = ("tool_input", "answers", "answer_details", "request_preview")


def truncated(value: Any, depth: int = 0) -> Any:
    """`value` with long strings cut and long or deep containers shortened, each cut marked."""
    if isinstance(value, str):
        if len(value) <= MAX_STRING_CHARS:
            return value
        return f"{value[:MAX_STRING_CHARS]}…[truncated: {len(value)} chars]"
    if isinstance(value, Mapping):
        if depth >= MAX_DEPTH:
            return "[truncated: nested too deep]"
        items = list(value.items())
        kept = {truncated(str(key)): truncated(item, depth + 1) for key, item in items[:MAX_ITEMS]}
        if len(items) > MAX_ITEMS:
            kept["[truncated]"] = f"{len(items) - MAX_ITEMS} more keys"
        return kept
    if isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            return "[truncated: nested too deep]"
        kept_items = [truncated(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept_items.append(f"[truncated: {len(value) - MAX_ITEMS} more items]")
        return kept_items
    return value


def _line(record: Mapping[str, Any]) -> bytes:
    # "replace": a lone surrogate (valid in JSON escapes) must not make a record unwritable.
    # backslashreplace: a lone surrogate (a "\\udcff" escape in an event) is written back as that escape.
    return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8", "backslashreplace")


def without_bodies(record: Mapping[str, Any], why: str) -> dict[str, Any]:
    return {**record, **{name: None for name in BODY_FIELDS if name in record}, "bodies_dropped": why}


def bounded_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as it is written: truncated, and without its big fields if still too long."""
    kept: dict[str, Any] = truncated(record)
    if len(_line(kept)) <= MAX_RECORD_BYTES:
        return kept
    sizes = {name: len(_line({name: kept[name]})) for name in BODY_FIELDS if kept.get(name) is not None}
    slim = without_bodies(kept, f"record over {MAX_RECORD_BYTES} bytes")
    return {**slim, **{name: {"truncated": True, "bytes": size} for name, size in sizes.items()}}


class DecisionLog:
    """Append-only JSON lines, one per decision, flushed as written; safe from many threads."""

    def __init__(self, path: Path, *, max_bytes: int = MAX_FILE_BYTES,
                 metadata_allowance: int = METADATA_ALLOWANCE_BYTES) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_bytes = max_bytes
        self.hard_max_bytes = max_bytes + metadata_allowance
        self._handle: BinaryIO | None = open(path, "ab")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self._written = 0
        self._dropped = 0
        self._last: dict[str, Any] | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        bounded = bounded_record(record)
        line = _line(bounded)
        with self._lock:
            if self._handle is None:
                return
            if self._written + len(line) > self.max_bytes:
                bounded = without_bodies(bounded, f"log size cap of {self.max_bytes} bytes")
                line = _line(bounded)
            if self._written + len(line) > self.hard_max_bytes:
                self._dropped += 1
                self._last = bounded
                return
            self._handle.write(line)
            self._handle.flush()
            self._written += len(line)

    @property
    def dropped(self) -> int:
        with self._lock:
            return self._dropped

    def close(self) -> None:
        with self._lock:
            if self._handle is None:
                return
            if self._dropped and self._last is not None:
                note = f"{self._dropped} record(s) not written past the log's cap of {self.hard_max_bytes} bytes"
                self._handle.write(_line({**self._last, "log_note": note + "; this is the last of them"}))
            self._handle.close()
            self._handle = None
