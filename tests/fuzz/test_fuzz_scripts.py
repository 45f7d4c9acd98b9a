"""Model, hook and judge scripts from hell: a valid script, or one clear line naming the step and key."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.gateway.script import Script, parse_script

from .checks import outcome
from .strategies import VALUES

STEP_KEYS = ["text", "tool", "input", "tool_calls", "error", "usage", "model", "delay_s", "tol", "inptu", "advance"]
NESTED = {
    "tool_calls": st.lists(st.dictionaries(st.sampled_from(["tool", "input", "inpt"]), VALUES, max_size=3), max_size=3),
    "error": st.dictionaries(st.sampled_from(["status", "type", "message", "stats"]), VALUES, max_size=3),
    "usage": st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "cache_read_input_tokens", "tokens"]),
                             VALUES, max_size=3),
}
STEPS = st.lists(
    st.dictionaries(st.sampled_from(STEP_KEYS), VALUES, max_size=4).flatmap(
        lambda step: st.fixed_dictionaries({k: NESTED.get(k, st.just(v)) for k, v in step.items()})
    ) | VALUES,
    max_size=5,
)
SCRIPTS = STEPS | st.fixed_dictionaries({"steps": STEPS}, optional={"advance": VALUES, "stesp": VALUES}) | VALUES


@given(SCRIPTS)
def test_a_script_parses_or_fails_in_one_line(data: Any) -> None:
    result = outcome(lambda: parse_script(data, source="cases/c1/model_script.yaml"), ConfigError)
    if isinstance(result, ConfigError):
        assert result.file == "cases/c1/model_script.yaml"
        assert "Input should" not in result.message
        if result.field and result.field.startswith("steps["):
            assert "(step " in result.field
    else:
        assert isinstance(result, Script)
