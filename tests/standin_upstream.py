"""A stand-in for the real model API, of the tests' own: varied answers generated from a seed.

Not the project's scripted model server and not its script format: this
server decides its answers itself, turn by turn, from a seed and what the
request holds — random file names and contents (some of them not ASCII),
one or two tool calls a turn, a final text quoting the last tool result —,
gives every message and tool call a fresh random id, and streams its SSE in
pieces of random sizes (cut anywhere, through multi-byte characters too). It
can answer a turn's first request with a 529 once, so that recordings hold a
retry. What it sent is kept per request, to compare with what was recorded.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import string
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORDS = ("amber", "basalt", "cedar", "dune", "ember", "fjord", "garnet", "heron", "iris", "juniper", "kelp",
         "lichen", "moraine", "nectar", "obsidian", "pumice", "quartz", "rime", "sorrel", "tundra")
NON_ASCII = ("ünïcødé", "日本語", "naïve", "Ωmega", "café", "🙂")


def _id(prefix: str) -> str:
    return prefix + "01" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(22))


@dataclass
class Sent:
    """One request the stand-in answered, and the bytes it answered with."""

    path: str
    headers: dict[str, str]
    body: Any
    status: int
    raw: bytes


@dataclass
class Conversation:
    """What a turn of a conversation gets: decided by the seed, the first message and the turn."""

    seed: str
    first: str
    turns: int = 0

    def rng(self, turn: int) -> random.Random:
        return random.Random(hashlib.sha256(f"{self.seed}|{self.first}|{turn}".encode()).hexdigest())


def _last_tool_result(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        for block in reversed(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(p.get("text", "") for p in inner if isinstance(p, dict))
                return str(inner).split("<system-reminder>")[0].strip()
    return ""


def plan_answer(body: dict[str, Any], seed: str) -> tuple[list[dict[str, Any]], str]:
    """The content blocks that answer `body`, and the stop reason (pure but for the ids)."""
    messages = body.get("messages") or []
    # The texts of the first message name the conversation (its cache markers move from request to request).
    content = messages[0].get("content") if messages else ""
    first = content if isinstance(content, str) else "".join(
        b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    rng = Conversation(seed, first).rng(turn)
    turns = 3 + rng.randrange(2)
    name = "".join(Conversation(seed, first).rng(0).sample(WORDS, 2))
    words = " ".join(rng.sample(WORDS, 3) + [rng.choice(NON_ASCII)])
    if turn == 0:
        # The sandbox's placeholder key goes into the conversation: recordings must not keep it.
        command = (f"mkdir -p out && printf '%s\\n' '{words}' > out/{name}.txt && echo wrote {name}"
                   " && printenv ANTHROPIC_API_KEY")
        return [{"type": "text", "text": f"Starting with {words}."},
                {"type": "tool_use", "id": _id("toolu_"), "name": "Bash", "input": {"command": command}}], "tool_use"
    if turn == 1:
        write = {"type": "tool_use", "id": _id("toolu_"), "name": "Write",
                 "input": {"file_path": f"/workspace/out/{name}-notes.md", "content": f"# {words}\n\n{rng.random()}\n"}}
        calls = [write]
        if rng.random() < 0.5:
            calls.append({"type": "tool_use", "id": _id("toolu_"), "name": "Bash",
                          "input": {"command": f"wc -c < out/{name}.txt"}})
        return calls, "tool_use"
    if turn == 2 and turns == 4:
        return [{"type": "tool_use", "id": _id("toolu_"), "name": "Read",
                 "input": {"file_path": f"/workspace/out/{name}.txt"}}], "tool_use"
    quoted = _last_tool_result(body)[:60]
    return [{"type": "text", "text": f"Finished ({words}); the last tool said: {quoted}"}], "end_turn"


def _events(message: dict[str, Any], rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening, text, kind, key = {"type": "text", "text": ""}, block["text"], "text_delta", "text"
        else:
            opening = {**block, "input": {}}
            text, kind, key = json.dumps(block["input"]), "input_json_delta", "partial_json"
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opening}))
        position = 0
        while position < len(text):
            size = rng.randint(1, 25)
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": kind, key: text[position:position + size]}}))
            position += size
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def sse_bytes(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
                    for name, data in events)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.loads(raw)
        standin = self.server.standin
        if self.path.split("?")[0] == "/v1/messages/count_tokens":
            self._json(200, {"input_tokens": len(raw) // 4}, body)
            return
        turn = sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")
        if standin.take_overload(turn):
            self._json(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, body)
            return
        content, stop = plan_answer(body, standin.seed)
        rng = random.Random(secrets.randbits(64))
        message = {"id": _id("msg_"), "type": "message", "role": "assistant", "model": body.get("model"),
                   "content": content, "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": rng.randint(800, 3000), "output_tokens": rng.randint(10, 200),
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": rng.randint(0, 500)}}
        if not body.get("stream"):
            self._json(200, message, body)
            return
        data = sse_bytes(_events(message, rng))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("request-id", _id("req_"))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        position = 0
        while position < len(data):
            piece = data[position:position + rng.randint(1, 300)]
            self.wfile.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            position += len(piece)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        standin.keep(Sent(self.path, dict(self.headers.items()), body, 200, data))

    def _json(self, status: int, data: dict[str, Any], body: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if status == 529:
            self.send_header("retry-after", "0")
        self.end_headers()
        self.wfile.write(payload)
        self.server.standin.keep(Sent(self.path, dict(self.headers.items()), body, status, payload))

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: StandinUpstream


@dataclass
class StandinUpstream:
    """`with StandinUpstream(seed) as upstream:` a Messages API at `upstream.url` until the block ends."""

    seed: str = field(default_factory=lambda: secrets.token_hex(4))
    overload_turn: int | None = None  # the first request of this turn (once per server) gets a 529
    sent: list[Sent] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _overloaded: bool = False
    _server: _Server | None = None

    def __enter__(self) -> StandinUpstream:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.standin = self
        self._server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def take_overload(self, turn: int) -> bool:
        with self._lock:
            if self.overload_turn == turn and not self._overloaded:
                self._overloaded = True
                return True
            return False

    def keep(self, sent: Sent) -> None:
        with self._lock:
            self.sent.append(sent)
