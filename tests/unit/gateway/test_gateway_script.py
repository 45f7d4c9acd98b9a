import pytest

from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.gateway.script import (
    Advance,
    Step,
    load_script,
    parse_script,
    select_step_index,
    tool_choice_conflict,
)


def test_a_list_is_a_script():
    script = parse_script([{"tool": "Bash", "input": {"command": "ls"}}, {"text": "done"}])
    assert script.advance is Advance.PER_TURN
    assert [c.tool for c in script.steps[0].calls] == ["Bash"]
    assert script.steps[1].calls == [] and script.steps[1].text == "done"


def test_a_mapping_sets_options():
    script = parse_script({"advance": "per_request", "steps": [{"text": "a"}, {"error": {"status": 529}}]})
    assert script.advance is Advance.PER_REQUEST
    assert script.steps[1].error.http_status == 529
    assert script.steps[1].error.error_type == "overloaded_error"


def test_error_type_alone_gives_the_status():
    step = parse_script([{"error": {"type": "rate_limit_error", "message": "slow down"}}]).steps[0]
    assert (step.error.http_status, step.error.error_type) == (429, "rate_limit_error")


def test_several_tool_calls_and_leading_text():
    step = parse_script(
        [{"text": "two things", "tool_calls": [{"tool": "Read", "input": {"file_path": "a"}}, {"tool": "Bash"}]}]
    ).steps[0]
    assert [(c.tool, c.input) for c in step.calls] == [("Read", {"file_path": "a"}), ("Bash", {})]


@pytest.mark.parametrize(
    ("steps", "field", "words"),
    [
        ([{"text": "ok"}, {"tool": "Bash", "imput": {}}], "steps[1] (step 2)", "unknown key 'imput' (did you mean 'input'?)"),
        ([{"text": "ok"}, {}], "steps[1] (step 2)", "a step needs"),
        ([{"tool": "Bash", "tool_calls": [{"tool": "Read"}]}], "steps[0] (step 1)", "not both"),
        ([{"text": "x", "input": {"a": 1}}], "steps[0] (step 1)", "add `tool: NAME`"),
        ([{"text": "x", "error": {"status": 500}}], "steps[0] (step 1)", "error only"),
        ([{"error": {"message": "no status"}}], "steps[0].error (step 1)", "needs a `status`"),
        ([{"error": {"type": "made_up"}}], "steps[0].error (step 1)", "unknown error type"),
        ([{"text": "x"}, {"text": "y"}, {"tool": "Bash", "input": "ls"}], "steps[2].input (step 3)", "must be a mapping of keys to values (got 'ls')"),
        ([{"text": "x", "usage": {"input_tokens": -1}}], "steps[0].usage.input_tokens (step 1)", "must be at least 0 (got -1)"),
        ([{"text": "x", "usage": {"input_token": 5}}], "steps[0].usage (step 1)", "unknown key 'input_token' (did you mean 'input_tokens'?)"),
        ([{"text": "x", "usage": {"cache_creation_1h_input_tokens": 5}}], "steps[0].usage (step 1)", "cannot be larger"),
        ([{"tool_calls": [{"tool": "Read", "inputs": {}}]}], "steps[0].tool_calls[0] (step 1)",
         "unknown key 'inputs' (did you mean 'input'?)"),
        ([{"text": "x", "error": {"stauts": 529}}], "steps[0].error (step 1)", "unknown key 'stauts' (did you mean 'status'?)"),
        (["just text"], "steps[0] (step 1)", "must be a mapping"),
    ],
)
def test_a_bad_step_is_one_error_naming_file_and_step(steps, field, words):
    with pytest.raises(ConfigError) as caught:
        parse_script(steps, source="case-1/script.yaml")
    assert caught.value.file == "case-1/script.yaml"
    assert caught.value.field == field
    assert words in caught.value.message


@pytest.mark.parametrize(
    ("data", "words"),
    [({"stesp": [{"text": "x"}]}, "unknown key 'stesp' (did you mean 'steps'?)"), ({"advance": "per_turn"}, "'steps' is required")],
)
def test_a_bad_script_mapping_names_the_key(data, words):
    with pytest.raises(ConfigError) as caught:
        parse_script(data, source="s.yaml")
    assert words in caught.value.message and caught.value.field is None


def test_a_script_that_is_not_a_list_is_rejected():
    with pytest.raises(ConfigError, match="list of steps"):
        parse_script("just text", source="s.yaml")


def test_load_script_names_the_file(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text("- text: fine\n- tool: Bash\n  input: {command: ls}\n  delay_s: -1\n")
    with pytest.raises(ConfigError) as caught:
        load_script(path)
    assert str(path) in str(caught.value) and "steps[1].delay_s (step 2)" in str(caught.value)
    assert load_script(_write(tmp_path / "ok.yaml", "- text: hi\n")).source == str(tmp_path / "ok.yaml")


def _write(path, text):
    path.write_text(text)
    return path


def test_per_turn_counts_assistant_messages_only():
    request = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": []},
            {"role": "user", "content": []},
            {"role": "assistant", "content": []},
            {"role": "user", "content": []},
        ]
    }
    assert select_step_index(Advance.PER_TURN, request, served_before=17) == 2
    assert select_step_index(Advance.PER_TURN, {"messages": "garbage"}, served_before=3) == 0


def test_per_request_counts_requests():
    assert select_step_index(Advance.PER_REQUEST, {"messages": [{"role": "assistant"}]}, served_before=4) == 4


def test_step_at_past_the_end_is_none():
    script = parse_script([{"text": "only"}])
    assert script.step_at(0) is not None and script.step_at(1) is None


VERDICT = Step(tool="verdict", input={"score": 1})
TEXT = Step(text="hello")


@pytest.mark.parametrize(
    ("step", "choice", "conflict"),
    [
        (VERDICT, None, None),
        (VERDICT, {"type": "auto"}, None),
        (VERDICT, {"type": "tool", "name": "verdict"}, None),
        (VERDICT, {"type": "tool", "name": "grade"}, "name: grade} but the step calls verdict"),
        (TEXT, {"type": "tool", "name": "grade"}, "but the step answers with text"),
        (TEXT, {"type": "any"}, "forces a tool call"),
        (VERDICT, {"type": "any"}, None),
        (VERDICT, {"type": "none"}, "forbids tool calls"),
        (Step(error={"status": 500}), {"type": "tool", "name": "grade"}, None),
    ],
)
def test_tool_choice_conflicts(step, choice, conflict):
    found = tool_choice_conflict(step, choice)
    assert (found is None) if conflict is None else (conflict in found)
