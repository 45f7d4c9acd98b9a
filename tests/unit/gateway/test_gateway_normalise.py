"""What replay compares requests by: each normalisation rule, and that real differences survive them."""

from __future__ import annotations

import copy
import json
from typing import Any

from agent_eval_sandbox.gateway.credentials import PLACEHOLDER_API_KEY
from agent_eval_sandbox.gateway.normalise import (
    NOTES_BLOCK,
    canonical,
    normalise_request,
    normalise_string,
    request_key,
)

SESSION = "9ce26235-ea66-4456-80e4-bff4193558ee"
BUDGET = "\n\n<system-reminder>\nUSD budget: $0.066585/$100; $99.933415 remaining\n</system-reminder>"
TOKENS = "\n\n<system-reminder>\n<total_tokens>14977973 tokens left</total_tokens>\n</system-reminder>"


def _request(*, tool_ids: tuple[str, str] = ("toolu_01AAA", "toolu_01BBB"), session: str = SESSION,
             date: str = "2026-12-01", budget: str = BUDGET, results_order: tuple[int, int] = (0, 1),
             reminder_on: int = 1, os_version: str = "Linux 6.18.44-fc-v657", cc: str = "2.1.332.3ea",
             cache_on: int = 1, text: str = "Do what the arguments say.") -> dict[str, Any]:
    outputs = ["hello.txt", "1\thi\n2\t"]
    results = []
    for index in results_order:
        content = outputs[index]
        if index == reminder_on:
            content = content.rstrip() + TOKENS + budget
        block: dict[str, Any] = {"tool_use_id": tool_ids[index], "type": "tool_result", "content": content}
        results.append(block)
    results[cache_on if cache_on < len(results) else -1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 32000,
        "stream": True,
        "metadata": {"user_id": json.dumps({"device_id": "8b6bed", "session_id": session})},
        "system": [{"type": "text", "text": f"x-anthropic-billing-header: cc_version={cc}; cc_entrypoint=sdk-cli;"},
                   {"type": "text", "text": f"Today's date is {date}.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f" - OS Version: {os_version}\n - Shell: bash"},
                                         {"type": "text", "text": text}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": tool_ids[0], "name": "Bash", "input": {"command": "ls out"}},
                {"type": "tool_use", "id": tool_ids[1], "name": "Read", "input": {"file_path": "/workspace/x"}}]},
            {"role": "user", "content": results},
        ],
    }


def _same(a: Any, b: Any) -> bool:
    return request_key("POST", "/v1/messages", a) == request_key("POST", "/v1/messages", b)


def test_a_request_is_the_same_as_itself_and_normalising_does_not_change_it():
    body = _request()
    before = copy.deepcopy(body)
    assert _same(body, copy.deepcopy(body))
    normalise_request(body)
    assert body == before


def test_what_the_cli_changes_from_run_to_run_does_not_count():
    base = _request()
    variants = {
        "session and device ids": _request(session="f22aacf8-422b-466d-b06a-657b36704415"),
        "tool-use ids": _request(tool_ids=("toolu_01XyZ", "toolu_01QrS")),
        "the date": _request(date="2027-01-02"),
        "the budget reminder": _request(budget=BUDGET.replace("0.066585", "0.1").replace("99.933415", "99.9")),
        "the CLI build in the billing header": _request(cc="2.1.340.93d"),
        "the host's kernel": _request(os_version="Linux 5.10.0-28-amd64"),
        "cache markers": _request(cache_on=0),
        "parallel results finishing the other way round": _request(results_order=(1, 0), reminder_on=0),
    }
    for what, variant in variants.items():
        assert _same(base, variant), what


def test_what_the_agent_or_the_skill_changes_counts():
    base = _request()
    assert not _same(base, _request(text="Do what the arguments say, in French."))
    changed_output = copy.deepcopy(base)
    changed_output["messages"][2]["content"][0]["content"] = "other.txt"
    assert not _same(base, changed_output)
    for key, value in (("model", "claude-opus-4-6"), ("max_tokens", 1000), ("tools", [{"name": "Bash"}])):
        assert not _same(base, {**base, key: value}), key
    fewer = {**base, "messages": base["messages"][:1]}
    assert not _same(base, fewer)
    # the same ids given to other calls: the calls are not the same
    swapped = _request(tool_ids=("toolu_01BBB", "toolu_01AAA"))
    swapped["messages"][1]["content"].reverse()
    assert not _same(base, swapped)
    # another method or path is another request
    assert request_key("POST", "/v1/messages", base) != request_key("POST", "/v1/messages/count_tokens", base)


def test_ids_become_ordinals_by_first_appearance_everywhere_they_occur():
    body = {"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01Zed", "name": "Agent", "input": {}},
                                          {"type": "server_tool_use", "id": "srvtoolu_01Q", "name": "web",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01Zed", "content":
                                      "agentId: a583c652d0dc7f2e3 (use SendMessage to 'a583c652d0dc7f2e3')"}]},
        {"role": "user", "content": "<task-id>a583c652d0dc7f2e3</task-id><tool-use-id>toolu_01Zed</tool-use-id>"
                                    "<duration_ms>127</duration_ms>"},
    ]}
    out = normalise_request(body)
    assert out["messages"][0]["content"][0]["id"] == "<toolu#1>"
    assert out["messages"][0]["content"][1]["id"] == "<toolu#2>"
    assert out["messages"][1]["content"][0]["tool_use_id"] == "<toolu#1>"
    assert out["messages"][1]["content"][0]["content"] == "agentId: <agent#1> (use SendMessage to '<agent#1>')"
    assert out["messages"][2]["content"] == ("<task-id><agent#1></task-id><tool-use-id><toolu#1></tool-use-id>"
                                             "<duration_ms><n></duration_ms>")


def test_string_rules():
    assert normalise_string(f"key {PLACEHOLDER_API_KEY}!") == "key [redacted]!"
    assert normalise_string(f"/tmp/-workspace/{SESSION}/tasks") == "/tmp/-workspace/<uuid>/tasks"
    assert normalise_string("at 2026-12-01T07:48:25.232Z, 2026-12-01, 07:48:25") == "at <date>, <date>, <time>"
    assert normalise_string("USD budget: $0.13418400000000003/$100; $99.865816 remaining") == "USD budget: <usd>"
    assert normalise_string("<total_tokens>14977579 tokens left</total_tokens>") == (
        "<total_tokens><n> tokens left</total_tokens>")
    assert normalise_string("cc_version=2.1.332.3ea; cc_entrypoint=sdk-cli;") == (
        "cc_version=<version>; cc_entrypoint=sdk-cli;")
    assert normalise_string(" - OS Version: Linux 6.18.44\n - Shell: bash") == " - OS Version: <os>\n - Shell: bash"
    # numbers that are not one of those stay
    assert normalise_string("ratio 16:9, 1200 tokens, $5 budget") == "ratio 16:9, 1200 tokens, $5 budget"


def test_reminders_come_off_the_tool_results_and_are_kept_once_per_message_in_order():
    out = normalise_request(_request())
    results = out["messages"][2]["content"]
    assert [r["content"] for r in results[:2]] == ["hello.txt", "1\thi\n2"]
    notes = results[2]
    assert notes["type"] == NOTES_BLOCK and "<total_tokens><n> tokens left" in notes["text"]
    assert notes["text"].index("total_tokens") < notes["text"].index("USD budget: <usd>")
    assert "cache_control" not in canonical(out) and "metadata" not in out


def test_reminders_in_blocks_of_a_results_content_come_off_too():
    def body(last_has_notes: bool) -> dict[str, Any]:
        blocks = [{"type": "text", "text": "launched"}]
        if last_has_notes:
            blocks.append({"type": "text", "text": TOKENS.strip() + "\n"})
        return {"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": blocks},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "done" + ("" if last_has_notes else TOKENS)},
        ]}]}

    assert canonical(normalise_request(body(True))) == canonical(normalise_request(body(False)))


def test_odd_bodies_are_normalised_not_refused():
    for body in (None, "text", 3, [], {"messages": "no list"}, {"messages": [None, {"content": 5}]},
                 {"metadata": {"user_id": "u", "other": 1}}):
        normalise_request(body)
    assert normalise_request({"metadata": {"user_id": "u", "other": 1}}) == {"metadata": {"other": 1}}
