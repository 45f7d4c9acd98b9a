"""(a) The real claude CLI against the scripted model server, directly."""

from agent_eval_sandbox.gateway import ScriptedModelServer


def test_a_scripted_tool_call_really_runs_then_the_final_text_ends_the_run(run_claude, write_script):
    script = write_script(
        [
            {
                "text": "I'll create the file.",
                "tool": "Bash",
                "input": {"command": "echo scripted > made.txt"},
                "usage": {"input_tokens": 1000, "output_tokens": 50},
            },
            {"text": "Created made.txt.", "usage": {"input_tokens": 1100, "output_tokens": 10}},
        ]
    )
    with ScriptedModelServer(script) as server:
        run = run_claude(server.url, prompt="Create made.txt")

    assert run.returncode == 0, run.stderr
    assert (run.cwd / "made.txt").read_text() == "scripted\n"
    result = run.result
    assert result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "Created made.txt."
    assert result["num_turns"] == 2
    assert result["usage"]["input_tokens"] == 2100 and result["usage"]["output_tokens"] == 60
    # The CLI prices sonnet like our table: 2100 x $3 + 60 x $15 per MTok.
    assert abs(result["total_cost_usd"] - 0.0072) < 1e-9

    tool_results = [
        block
        for event in run.events
        if event.get("type") == "user"
        for block in event["message"]["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(tool_results) == 1 and tool_results[0]["is_error"] is False

    # What 2.1.332 sends with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: model calls only.
    requests = server.requests
    assert [(r.method, r.path) for r in requests] == [("POST", "/v1/messages?beta=true")] * 2
    assert [r.step_index for r in requests] == [0, 1]
    first = requests[0]
    assert first.body["stream"] is True and first.body["model"] == "claude-sonnet-4-5"
    assert first.headers["x-api-key"] == "placeholder"
    assert first.headers["anthropic-version"] == "2023-06-01"


def test_past_the_end_of_the_script_the_cli_gets_a_final_text(run_claude, write_script):
    script = write_script([{"tool": "Bash", "input": {"command": "true"}}])
    with ScriptedModelServer(script) as server:
        run = run_claude(server.url)
    assert run.returncode == 0, run.stderr
    assert "script is exhausted" in run.result["result"]
