from agent_eval_sandbox.config.env import resolve_env


def test_var_resolved_unset_omitted_literal_unchanged():
    declared = {"A": "$HOME_X", "B": "$MISSING", "C": "literal", "D": "${BRACED}", "E": "x$HOME_X", "F": "$"}
    environ = {"HOME_X": "/h", "BRACED": "b"}
    assert resolve_env(declared, environ) == {"A": "/h", "C": "literal", "D": "b", "E": "x$HOME_X", "F": "$"}


def test_empty_value_of_set_var_is_kept():
    assert resolve_env({"A": "$E"}, {"E": ""}) == {"A": ""}
