"""Server-sent events of the Messages API: encoding, decoding, reassembly.

Pure: no sockets. The scripted server turns a message into events and bytes;
the gateway decodes the bytes it relays to account usage and log the message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from agent_eval_sandbox.gateway.usage import Usage, usage_from_api

Event = tuple[str, dict[str, Any]]

# Small deltas on purpose: clients must cope with text and tool JSON split
# anywhere, and a fake server that always sends one delta hides their bugs.
DEFAULT_CHUNK_CHARS = 40


def encode_event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def message_events(message: Mapping[str, Any], chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[Event]:
    """The event stream that delivers `message` (a complete Messages API response)."""
    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    # Like the real API: message_start reports the input side and a
    # placeholder output count; message_delta reports the final counts.
    start["usage"] = {**usage, "output_tokens": min(1, usage.get("output_tokens", 0))}
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message.get("content") or []):
        if block.get("type") == "tool_use":
            opening = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _pieces(json.dumps(block.get("input", {})), chunk_chars)
            ]
        else:
            opening = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block.get("text", ""), chunk_chars)]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")},
                "usage": usage,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class SSEDecoder:
    """Incremental parser: feed bytes as they arrive, get complete events out.

    Only `event:` and `data:` fields matter for this API; `data` is JSON, and
    a data line that is not JSON is kept as `{"raw": ...}` rather than lost.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._name: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        events: list[Event] = []
        while True:
            line, sep, rest = self._buffer.partition(b"\n")
            if not sep:
                return events
            self._buffer = rest
            text = line.rstrip(b"\r").decode("utf-8", errors="replace")
            if text == "":
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif text.startswith(":"):
                continue
            else:
                field, _, value = text.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "event":
                    self._name = value
                elif field == "data":
                    self._data.append(value)

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._name = None
            return None
        raw = "\n".join(self._data)
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            data = {"raw": raw}
        if not isinstance(data, dict):
            data = {"raw": data}
        name = self._name or str(data.get("type", "message"))
        self._name, self._data = None, []
        return name, data


class MessageAssembler:
    """Rebuilds the message (and its usage) from a stream's events, for the log."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.usage = Usage()
        self.error: dict[str, Any] | None = None
        # message_delta carries the final counts: from then on the bill is known.
        self.usage_final = False
        self.event_count = 0
        # Characters of text, thinking and tool input streamed so far: what a
        # stream cut off before its final usage is charged for (see gateway.py).
        self.streamed_chars = 0
        self._partial_json: dict[Any, str] = {}

    def feed(self, event: Event) -> None:
        name, data = event
        self.event_count += 1
        if name == "message_start" and isinstance(data.get("message"), dict):
            content = data["message"].get("content")
            blocks = [dict(b) for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            self.message = {**data["message"], "content": blocks}
            self.usage = usage_from_api(self.message.get("usage"))
        elif name == "content_block_start":
            self._block_start(data)
        elif name == "content_block_delta":
            self._block_delta(data)
        elif name == "content_block_stop":
            self._block_stop(data)
        elif name == "message_delta":
            if isinstance(data.get("delta"), dict):
                self.message.update(data["delta"])
            self.usage = usage_from_api(data.get("usage"), base=self.usage)
            self.usage_final = True
        elif name == "error":
            self.error = data.get("error") if isinstance(data.get("error"), dict) else data
        self.message["usage"] = self.usage.to_api()

    def _block(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        index, content = data.get("index"), self._content()
        if isinstance(index, int) and 0 <= index < len(content):
            block: dict[str, Any] = content[index]
            return block
        return None

    def _content(self) -> list[dict[str, Any]]:
        # Odd upstream shapes (a delta that rewrote `content`) must not break the relay.
        if not isinstance(self.message.get("content"), list):
            self.message["content"] = []
        content: list[dict[str, Any]] = self.message["content"]
        return content

    def _block_start(self, data: Mapping[str, Any]) -> None:
        content = self._content()
        index, block = data.get("index"), data.get("content_block")
        # Blocks arrive in index order; anything else is ignored rather than
        # letting an odd stream grow the list without bound.
        if not isinstance(block, dict) or not isinstance(index, int) or not 0 <= index <= len(content):
            return
        if index == len(content):
            content.append(dict(block))
        else:
            content[index] = dict(block)

    def _block_delta(self, data: Mapping[str, Any]) -> None:
        block, delta = self._block(data), data.get("delta")
        if block is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta":
            self.streamed_chars += _append(block, "text", delta.get("text"))
        elif kind == "thinking_delta":
            self.streamed_chars += _append(block, "thinking", delta.get("thinking"))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "input_json_delta":
            self.streamed_chars += _append(self._partial_json, data["index"], delta.get("partial_json"))

    def _block_stop(self, data: Mapping[str, Any]) -> None:
        block = self._block(data)
        if block is None:
            return
        partial = self._partial_json.pop(data["index"], None)
        if partial is None:
            return
        try:
            block["input"] = json.loads(partial) if partial else {}
        except json.JSONDecodeError:
            block["input"] = {"unparsed_json": partial}


def _append(target: dict[Any, Any], key: Any, piece: Any) -> int:
    """Concatenate a delta onto what came before (non-text on either side counts as nothing); its length."""
    before = target.get(key)
    added = piece if isinstance(piece, str) else ""
    target[key] = (before if isinstance(before, str) else "") + added
    return len(added)
