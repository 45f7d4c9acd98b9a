import json

from hypothesis import given
from hypothesis import strategies as st

from agent_eval_sandbox.gateway.sse import (
    MessageAssembler,
    SSEDecoder,
    encode_event,
    message_events,
)
from agent_eval_sandbox.gateway.usage import Usage

MESSAGE = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Let me run a fairly long command to see what happens here."},
        {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "Bash",
            "input": {"command": "echo 'hi' > out.txt", "n": [1, 2]},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": Usage(input_tokens=1200, output_tokens=80, cache_read_input_tokens=300).to_api(),
}


def test_encode_event_is_one_sse_frame():
    assert encode_event("ping", {"type": "ping"}) == b'event: ping\ndata: {"type":"ping"}\n\n'


def test_message_events_follow_the_api_order():
    names = [name for name, _ in message_events(MESSAGE)]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2


def test_message_start_is_empty_and_reports_input_usage():
    _, start = message_events(MESSAGE)[0]
    assert start["message"]["content"] == [] and start["message"]["stop_reason"] is None
    assert start["message"]["usage"]["input_tokens"] == 1200
    assert start["message"]["usage"]["output_tokens"] == 1


def test_deltas_are_split_and_typed():
    events = message_events(MESSAGE, chunk_chars=10)
    text = [d["delta"] for n, d in events if n == "content_block_delta" and d["index"] == 0]
    tool = [d["delta"] for n, d in events if n == "content_block_delta" and d["index"] == 1]
    assert len(text) > 1 and all(d["type"] == "text_delta" for d in text)
    assert "".join(d["text"] for d in text) == MESSAGE["content"][0]["text"]
    assert all(d["type"] == "input_json_delta" for d in tool)
    assert json.loads("".join(d["partial_json"] for d in tool)) == MESSAGE["content"][1]["input"]
    tool_start = next(d for n, d in events if n == "content_block_start" and d["index"] == 1)
    assert tool_start["content_block"]["input"] == {}


def test_message_delta_carries_stop_reason_and_final_usage():
    _, delta = message_events(MESSAGE)[-2]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] == 80


def _stream_bytes() -> bytes:
    return b"".join(encode_event(name, data) for name, data in message_events(MESSAGE, chunk_chars=7))


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=200))
def test_decoder_and_assembler_rebuild_the_message_from_any_split(cuts):
    raw = _stream_bytes()
    decoder, assembler, pos = SSEDecoder(), MessageAssembler(), 0
    for size in [*cuts, len(raw)]:
        for event in decoder.feed(raw[pos : pos + size]):
            assembler.feed(event)
        pos += size
    assert assembler.message["content"] == MESSAGE["content"]
    assert assembler.message["stop_reason"] == "tool_use"
    assert assembler.usage == Usage(input_tokens=1200, output_tokens=80, cache_read_input_tokens=300)
    assert assembler.event_count == len(message_events(MESSAGE, chunk_chars=7))
    assert assembler.usage_final


def test_decoder_handles_crlf_comments_multiline_and_non_json():
    decoder = SSEDecoder()
    events = decoder.feed(b': keepalive\r\nevent: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\ndata: not json\n\n')
    assert events == [("a", {"x": 1}), ("message", {"raw": "not json"})]


def test_decoder_names_unnamed_events_by_type():
    assert SSEDecoder().feed(b'data: {"type":"ping"}\n\n') == [("ping", {"type": "ping"})]


def test_assembler_keeps_stream_errors_and_ignores_out_of_order_blocks():
    assembler = MessageAssembler()
    assembler.feed(("message_start", {"message": {"id": "m", "content": [], "usage": {"input_tokens": 5}}}))
    assembler.feed(("content_block_start", {"index": 7, "content_block": {"type": "text", "text": ""}}))
    assembler.feed(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}))
    assert assembler.message["content"] == []
    assert assembler.error == {"type": "overloaded_error", "message": "busy"}
    assert assembler.usage.input_tokens == 5 and not assembler.usage_final


def test_assembler_keeps_unparseable_tool_json():
    assembler = MessageAssembler()
    assembler.feed(("message_start", {"message": {"content": []}}))
    assembler.feed(("content_block_start", {"index": 0, "content_block": {"type": "tool_use", "input": {}}}))
    assembler.feed(
        ("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{oops"}})
    )
    assembler.feed(("content_block_stop", {"index": 0}))
    assert assembler.message["content"][0]["input"] == {"unparsed_json": "{oops"}


_SCALAR = st.none() | st.integers(-1, 2) | st.sampled_from(["", "x", "text_delta", "input_json_delta", "{"])
_JSONISH = (
    _SCALAR
    | st.lists(_SCALAR, max_size=2)
    | st.dictionaries(st.sampled_from(["index", "type", "text"]), _SCALAR, max_size=2)
)
_EVENT_DATA = st.fixed_dictionaries(
    {},
    optional={
        "message": _JSONISH,
        "index": _JSONISH,
        "content_block": _JSONISH,
        "delta": _JSONISH,
        "usage": _JSONISH,
        "error": _JSONISH,
    },
)
_NAMES = st.sampled_from(
    ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "error", "x"]
)


@given(st.lists(st.tuples(_NAMES, _EVENT_DATA), max_size=12))
def test_the_assembler_never_raises_whatever_the_upstream_sends(events):
    assembler = MessageAssembler()
    for event in events:
        assembler.feed(event)
    assert isinstance(assembler.usage, Usage)
