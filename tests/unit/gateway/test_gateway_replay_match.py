"""Which recorded exchange answers which request of a replay: positions, interleaving, drift."""

from __future__ import annotations

from typing import Any

from agent_eval_sandbox.gateway.cassette import Cassette, End, Entry, Header, Response
from agent_eval_sandbox.gateway.replay import TIMING_HINT, Matcher, Mismatch, flat_lines, request_diff

PATH = "/v1/messages?beta=true"


def _body(thread: str, turns: int, *, tool_id: str = "toolu_01rec", note: str = "") -> dict[str, Any]:
    """A conversation `thread` after `turns` tool calls (each answered with `ok`)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task of {thread}{note}"}]
    for turn in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"{tool_id}{thread}{turn}", "name": "Bash",
             "input": {"command": f"step {turn}"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"{tool_id}{thread}{turn}", "content": "ok"}]})
    return {"model": "claude-sonnet-4-6", "system": f"system of {thread}", "messages": messages}


def _entry(seq: int, body: Any, status: int = 200, answer: str = "") -> Entry:
    return Entry(seq=seq, method="POST", path=PATH, request=body,
                 response=Response(status=status, headers=[("content-type", "text/event-stream")],
                                   body=answer or f"event: message_start\ndata: {{\"seq\": {seq}}}\n\n"))


def _cassette(*entries: Entry) -> Cassette:
    return Cassette(Header(cassette=1, case_id="c1"), tuple(entries), End(entries=len(entries)))


def test_requests_in_recorded_order_get_their_own_exchanges_and_the_replay_is_clean():
    entries = [_entry(i, _body("main", i)) for i in range(3)]
    matcher = Matcher(_cassette(*entries))
    for i in range(3):
        answer = matcher.take("POST", PATH, _body("main", i, tool_id="toolu_01new"))  # other ids: still a match
        assert isinstance(answer, Entry) and answer.seq == i
    assert matcher.verdict() is None and matcher.served == 3


def test_interleaved_subagents_find_their_exchanges_whatever_order_they_come_in():
    # recorded: main 0, sub A 0, sub B 0, sub A 1, sub B 1, main 1
    order = [("main", 0), ("A", 0), ("B", 0), ("A", 1), ("B", 1), ("main", 1)]
    matcher = Matcher(_cassette(*(_entry(i, _body(t, n)) for i, (t, n) in enumerate(order))))
    # replayed: the subagents raced the other way
    replayed = [("main", 0), ("B", 0), ("B", 1), ("A", 0), ("A", 1), ("main", 1)]
    seqs = []
    for thread, turn in replayed:
        answer = matcher.take("POST", PATH, _body(thread, turn))
        assert isinstance(answer, Entry), (thread, turn)
        seqs.append(answer.seq)
    assert seqs == [0, 2, 4, 1, 3, 5]
    assert matcher.verdict() is None


def test_equal_requests_are_answered_in_recorded_order():
    """A retry: the same body twice, first answered 529, then 200."""
    body = _body("main", 1)
    matcher = Matcher(_cassette(_entry(0, _body("main", 0)), _entry(1, body, status=529), _entry(2, body)))
    assert matcher.take("POST", PATH, _body("main", 0)).seq == 0
    first, second = matcher.take("POST", PATH, body), matcher.take("POST", PATH, body)
    assert (first.seq, first.response.status) == (1, 529) and (second.seq, second.response.status) == (2, 200)
    third = matcher.take("POST", PATH, body)  # a third time was never recorded
    assert isinstance(third, Mismatch) and "all 3 recorded exchanges were served already" in third.summary


def test_the_first_request_that_matches_nothing_is_a_mismatch_and_it_sticks():
    matcher = Matcher(_cassette(_entry(0, _body("main", 0)), _entry(1, _body("main", 1))))
    drifted = _body("main", 0, note=" (now in French)")
    mismatch = matcher.take("POST", PATH, drifted)
    assert isinstance(mismatch, Mismatch)
    assert mismatch.summary.startswith("replay mismatch: request 1 of the replay (POST /v1/messages?beta=true)")
    assert "nearest is seq 0" in mismatch.summary
    assert "expected 'messages[0].content: task of main'" in mismatch.summary
    assert "got 'messages[0].content: task of main (now in French)'" in mismatch.summary
    diff = mismatch.diff.splitlines()
    assert diff[0] == "--- cassette seq 0 (expected)" and diff[1] == "+++ request 1 of the replay (actual)"
    assert "-messages[0].content: task of main" in diff and "+messages[0].content: task of main (now in French)" in diff
    # what was recorded for the next turn is not handed out after a mismatch: the CLI must stop
    assert matcher.take("POST", PATH, _body("main", 1)) is mismatch
    assert matcher.verdict() is mismatch


def test_the_diff_is_against_the_nearest_unserved_request():
    matcher = Matcher(_cassette(_entry(0, _body("A", 0)), _entry(1, _body("B", 0)), _entry(2, _body("B", 1))))
    assert matcher.take("POST", PATH, _body("A", 0)).seq == 0
    changed = _body("B", 1)
    changed["messages"][2]["content"][0]["content"] = "not ok"
    mismatch = matcher.take("POST", PATH, changed)
    assert "nearest is seq 2" in mismatch.summary
    assert "expected 'messages[2].content[0].content: ok'" in mismatch.summary


def test_a_background_agents_notification_at_another_point_is_named_as_timing():
    """Recorded: the subagent finished before the main agent's next turn, so that turn carries its notification;
    replayed, it finished later. The summary says why, and a plain drift does not get that hint."""
    notification = ("\n<system-reminder>\n<task-notification>\n<task-id>a1</task-id>\n<status>completed</status>"
                    "\n</task-notification>\n</system-reminder>")
    recorded = _body("main", 1)
    recorded["messages"][2]["content"].append({"type": "text", "text": notification})
    matcher = Matcher(_cassette(_entry(0, _body("main", 0)), _entry(1, recorded)))
    matcher.take("POST", PATH, _body("main", 0))
    mismatch = matcher.take("POST", PATH, _body("main", 1))
    assert isinstance(mismatch, Mismatch) and "nearest is seq 1" in mismatch.summary
    assert mismatch.summary.endswith(TIMING_HINT)
    assert "-messages[2].content[1].text: <task-notification>" in mismatch.diff.splitlines()
    changed = _body("main", 1, note=" again")
    changed["messages"][2]["content"].append({"type": "text", "text": notification})
    drifted = Matcher(_cassette(_entry(0, recorded))).take("POST", PATH, changed)
    assert isinstance(drifted, Mismatch) and TIMING_HINT not in drifted.summary


def test_a_case_that_stops_early_leaves_exchanges_unasked_for_and_that_is_a_mismatch():
    matcher = Matcher(_cassette(*(_entry(i, _body("main", i)) for i in range(3))))
    matcher.take("POST", PATH, _body("main", 0))
    verdict = matcher.verdict()
    assert verdict is not None
    assert "the case made 1 request(s) and the cassette holds 3: 2 recorded exchange(s) were never asked for, " \
           "the first seq 1" in verdict.summary
    assert verdict.diff.startswith("--- cassette seq 1 (expected)\n+++ (no such request was made)")


def test_an_empty_cassette_mismatches_the_first_request():
    mismatch = Matcher(_cassette()).take("POST", PATH, _body("main", 0))
    assert isinstance(mismatch, Mismatch) and "the cassette holds no exchange" in mismatch.summary


def test_flat_lines_and_a_shortened_diff():
    assert flat_lines({"b": [1, "x\ny"], "a": {}}) == ["a: {}", "b[0]: 1", "b[1]: x", "b[1]: y"]
    long_expected = [f"line {i}" for i in range(2000)]
    long_actual = [f"line {i}" if i % 2 else "changed " + "z" * 1000 for i in range(2000)]
    diff = request_diff(long_expected, long_actual, "e", "a").splitlines()
    assert len(diff) <= 402 and diff[-1].startswith("… ") and diff[-1].endswith("more diff lines")
    assert all(len(line) < 500 for line in diff)
