"""Stage 1 (the reference's keyword heuristic), pre-resolved files, and load errors."""

from __future__ import annotations

import pytest
import yaml

from agent_eval_sandbox.config.models import DEFAULT_HOOK_MODEL
from agent_eval_sandbox.interception.compiler import (
    compile_handlers,
    extract_patterns,
    write_handlers,
)
from agent_eval_sandbox.interception.handlers import (
    HandlersError,
    load_handlers_file,
    parse_handlers,
)


@pytest.mark.parametrize(
    ("match", "patterns"),
    [
        # Known tool names, in the reference's list order, case-insensitively.
        ("Questions asked to the user via AskUserQuestion.", ["AskUserQuestion"]),
        ("any bash or read call", ["Bash", "Read"]),
        ("Edit, then Write; also Glob/GREP", ["Write", "Edit", "Glob", "Grep"]),
        ("Agent and Skill calls", ["Agent", "Skill"]),
        # Substrings count, as in the reference ("already" contains "read").
        ("already done", ["Read"]),
        # mcp__ tokens, with or without a trailing *, after the known names.
        ("Jira via mcp__atlassian__* or Bash scripts", ["Bash", "mcp__atlassian__*"]),
        ("the mcp__jira__create_issue tool", ["mcp__jira__create_issue"]),
        ("mcp__a__x and mcp__b*", ["mcp__a__x", "mcp__b*"]),
        # Nothing named: "script" or "api" means Bash...
        ("Any interaction with Jira through its scripts.", ["Bash"]),
        ("calls to the Slack API", ["Bash"]),
        ("capital letters: API", ["Bash"]),
        # ...but not when a tool was named.
        ("Jira via mcp__j__x scripts", ["mcp__j__x"]),
        ("Jira via MCP tools or scripts", ["Bash"]),
        # Otherwise the catch-all.
        ("Any interaction with Jira", ["*"]),
        ("", ["*"]),
    ],
)
def test_patterns_follow_the_reference_heuristic(match, patterns):
    assert extract_patterns(match) == patterns


def test_no_inputs_tools_means_no_interception(load_eval):
    loaded = load_eval("name: x\n", {"tool_handlers.yaml": "handlers: [{match: m, patterns: ['*']}]\n"})
    assert compile_handlers(loaded) is None


def test_heuristic_handlers_carry_match_prompt_and_the_hook_model(load_eval):
    loaded = load_eval(
        """
        models: {hook: claude-haiku-4-5}
        inputs:
          tools:
            - match: Questions asked to the user via AskUserQuestion.
              prompt: Pick the first option.
            - match: Any Jira interaction via mcp__atlassian__* or scripts calling the Jira API.
              prompt_file: prompts/jira.md
        """,
        {"prompts/jira.md": "Only allow test instances.\n"},
    )
    handlers = compile_handlers(loaded)
    assert handlers is not None
    assert handlers.hook_model == "claude-haiku-4-5"
    first, second = handlers.handlers
    assert (first.patterns, first.prompt) == (["AskUserQuestion"], "Pick the first option.")
    assert second.patterns == ["mcp__atlassian__*"]
    # prompt_file resolves relative to eval.yaml and fills the prompt.
    assert second.prompt == "Only allow test instances.\n" and second.prompt_file == "prompts/jira.md"
    assert second.input_filters == [] and second.env_checks == {}
    assert handlers.asks_user()


def test_the_hook_model_defaults_to_haiku(load_eval):
    handlers = compile_handlers(load_eval("inputs: {tools: [{match: AskUserQuestion}]}\n"))
    assert handlers is not None and handlers.hook_model == DEFAULT_HOOK_MODEL == "claude-haiku-4-5-20251001"


def test_a_missing_prompt_file_is_a_load_error(load_eval):
    loaded = load_eval("inputs: {tools: [{match: Bash scripts, prompt_file: nope.md}]}\n")
    with pytest.raises(HandlersError, match=r"eval\.yaml: handlers\[0\]: prompt_file 'nope\.md' cannot be read"):
        compile_handlers(loaded)


RESOLVED = """\
handlers:
  - match: Any Jira interaction via MCP tools or scripts.
    patterns: [Bash, "mcp__atlassian__*"]
    input_filters: [jira, JIRA_SERVER]
    env_checks:
      JIRA_SERVER: {must_contain: [localhost, test]}
    prompt: Only allow if JIRA_SERVER points to a test instance.
  - match: questions
    patterns: [AskUserQuestion]
    prompt_file: answer.md
    calibration: true
case_overrides:
  "What priority should this have?": Normal
  "Proceed?": yes
  "Count?": 3
  "Owner?": {answer: Alice, source: human}
"""


def test_a_pre_resolved_file_beside_eval_yaml_is_used_as_it_is(load_eval):
    loaded = load_eval(
        """
        models: {hook: claude-sonnet-4-5}
        inputs: {tools: [{match: "something else entirely"}]}
        """,
        {"tool_handlers.yaml": RESOLVED, "answer.md": "Answer as a tester."},
    )
    handlers = compile_handlers(loaded)
    assert handlers is not None
    jira, questions = handlers.handlers
    # The heuristic did not run: the file's handlers, checks and overrides stand.
    assert jira.patterns == ["Bash", "mcp__atlassian__*"]
    assert jira.input_filters == ["jira", "JIRA_SERVER"]
    assert jira.env_checks["JIRA_SERVER"].must_contain == ["localhost", "test"]
    assert questions.prompt == "Answer as a tester."  # prompt_file beside the handlers file
    # YAML scalars become answer text; a per-entry source is kept.
    assert handlers.case_overrides["Proceed?"] == "yes"
    assert handlers.case_overrides["Count?"] == "3"
    assert handlers.case_overrides["Owner?"].answer == "Alice"
    # The file had no hook_model: models.hook fills it, as the reference merges it.
    assert handlers.hook_model == "claude-sonnet-4-5"


def test_a_pre_resolved_hook_model_wins(load_eval):
    loaded = load_eval(
        "models: {hook: a}\ninputs: {tools: [{match: x}]}\n",
        {"tool_handlers.yaml": "handlers: []\nhook_model: b\n"},
    )
    handlers = compile_handlers(loaded)
    assert handlers is not None and handlers.hook_model == "b"


def test_a_regex_that_does_not_compile_is_one_clear_load_error(load_eval):
    loaded = load_eval(
        "inputs: {tools: [{match: x}]}\n",
        {"tool_handlers.yaml": "handlers:\n  - match: Jira scripts\n    patterns: [Bash]\n    input_filters: [ok, 'jira(']\n"},
    )
    with pytest.raises(HandlersError) as info:
        compile_handlers(loaded)
    message = str(info.value)
    assert "\n" not in message
    assert "tool_handlers.yaml: handlers[0].input_filters:" in message
    assert "(handler 'Jira scripts')" in message
    assert "input_filters[1] 'jira(' is not a valid regex: missing ), unterminated subpattern" in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"handlers": [{"match": "m", "pattern": ["Bash"]}]}, r"handlers\[0\]: \(handler 'm'\) unknown key 'pattern'"),
        ({"handlers": [{"patterns": "Bash"}]}, r"handlers\[0\]\.patterns: Input should be a valid list"),
        ({"handlers": [{"env_checks": {"X": {"must_contain": "a"}}}]}, r"env_checks\.X\.must_contain"),
        ({"handlers": {}}, r"handlers: Input should be a valid list"),
        ({"hook_models": "x"}, r"unknown key 'hook_models'"),
        (["not", "a", "mapping"], r"must be a mapping with `handlers:`"),
    ],
)
def test_malformed_handler_files_name_the_field(data, expected):
    with pytest.raises(HandlersError, match=expected):
        parse_handlers(data, "tool_handlers.yaml")


def test_write_handlers_writes_a_file_that_loads_back(load_eval, tmp_path):
    loaded = load_eval("inputs: {tools: [{match: Bash scripts calling the Jira API, prompt: test only}]}\n")
    target = write_handlers(loaded, tmp_path / "out" / "handlers.yaml")
    data = yaml.safe_load(target.read_text())
    assert data == {
        "handlers": [{"match": "Bash scripts calling the Jira API", "patterns": ["Bash"], "prompt": "test only"}],
        "hook_model": DEFAULT_HOOK_MODEL,
    }
    assert load_handlers_file(target).handlers[0].patterns == ["Bash"]
    # Defaults to tool_handlers.yaml beside eval.yaml, which later runs then use as is.
    assert write_handlers(loaded) == loaded.root / "tool_handlers.yaml"


def test_write_handlers_refuses_a_config_without_tools(load_eval):
    with pytest.raises(HandlersError, match=r"declares no inputs\.tools"):
        write_handlers(load_eval("name: x\n"))
