"""Hypothesis strategies for hostile configuration and data files."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=24),
    st.sampled_from(["", "0", "none", "case", "batch", "repo", "claude-code", "2g", "-1", "..", "../x", "/etc/passwd",
                     "{q}", "{q?}", "{{ input.q }}", "{% for %}", "{{", "${HOME}", "$HOME", "bypassPermissions",
                     "events.json", "_modified/x", "steps.a.output", "{{ steps.a.output }}", "weighted",
                     "0.6 * j + 0.4 * k", "j ** 2", "synthetic", "fail", "continue", "C:\\x", "~/x"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)

# The eval.yaml schema as far as a fuzzer needs it: known keys get plausible and random values.
SCHEMA: dict[str, list[str]] = {
    "execution": ["mode", "skill", "prompt", "arguments", "timeout", "max_budget_usd", "parallelism", "env", "steps"],
    "runner": ["type", "effort", "permission_mode", "settings", "plugin_dirs", "env", "system_prompt",
               "workspace_mode", "command"],
    "models": ["skill", "subagent", "judge", "hook"],
    "dataset": ["path", "schema", "workspace"],
    "permissions": ["allow", "deny"],
    "inputs": ["tools"],
    "traces": ["stdout", "stderr", "events", "metrics"],
    "hooks": ["before_all", "before_each", "before_step", "after_step", "after_each", "before_scoring", "after_all",
              "before_report"],
    "reward": ["judge", "normalize", "formula", "weights", "score_range", "raw", "gate"],
    "generation": ["strategy", "context", "seeds"],
    "sandbox": ["backend", "image", "runtime", "network", "cpus", "memory", "pids", "disk", "tmp_size", "home_size",
                "user", "read_only_root", "cap_drop", "cap_add", "filesystem"],
}
JUDGE_KEYS = ["name", "check", "builtin", "prompt", "prompt_file", "llm_rubric", "module", "function", "score_range",
              "feedback_type", "samples", "if", "context", "arguments", "description", "agent", "step"]
STEP_KEYS = ["id", "skill", "prompt", "arguments", "env", "timeout", "max_budget_usd", "runner", "on_failure"]
AGENT_KEYS = ["runner", "allowed_tools", "context", "inputs", "timeout", "max_budget_usd"]
SEED_KEYS = ["category", "count", "builtin", "prompt_file", "prompt", "description"]
OUTPUT_KEYS = ["path", "tool", "schema", "batch_pattern", "types"]


def _block(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=8), VALUES, max_size=len(keys))


def _list_of_blocks(keys: list[str]) -> st.SearchStrategy[Any]:
    return st.lists(_block(keys), max_size=3) | VALUES


_EVAL_PARTS = st.fixed_dictionaries(
    {},
    optional={
        **{name: _block(keys) | VALUES for name, keys in SCHEMA.items()},
        "name": SCALARS,
        "skill": SCALARS,
        "judges": _list_of_blocks(JUDGE_KEYS) | st.lists(
            st.fixed_dictionaries({"name": st.text(max_size=6), "prompt": SCALARS, "agent": _block(AGENT_KEYS),
                                   "step": SCALARS}), max_size=2),
        "steps_pipeline": st.fixed_dictionaries({"steps": _list_of_blocks(STEP_KEYS)}),
        "seeded_generation": st.fixed_dictionaries({"strategy": st.just("synthetic"),
                                                    "seeds": _list_of_blocks(SEED_KEYS)}),
        "outputs": _list_of_blocks(OUTPUT_KEYS),
        "thresholds": st.dictionaries(st.text(max_size=8), _block(["min_mean", "min_pass_rate", "max_error_rate"])
                                      | VALUES, max_size=3),
    },
)


def _assemble(parts: dict[str, Any]) -> dict[str, Any]:
    """Put the structured pipeline and seed lists where they belong, over whatever else was drawn."""
    document = dict(parts)
    pipeline = document.pop("steps_pipeline", None)
    if pipeline is not None:
        execution = document.get("execution")
        document["execution"] = {**(execution if isinstance(execution, dict) else {}), **pipeline}
    seeded = document.pop("seeded_generation", None)
    if seeded is not None:
        document["generation"] = seeded
    return document


EVAL_CONFIGS = _EVAL_PARTS.map(_assemble)

# Fragments that exercise the YAML parser's corners: anchors, aliases, tags, merges, documents.
YAML_TOKENS = st.sampled_from([
    "a: 1\n", "- x\n", "  ", "\t", ": ", "&a [1, 2]", "*a", "<<: *a\n", "!!python/object:os.system ''\n",
    "!!binary |\n  AAAA\n", "%YAML 1.1\n", "---\n", "...\n", "{", "}", "[", "]", "? k\n", "|\n", ">\n", "#", "'",
    '"', "\\", "execution:\n", "  mode: batch\n", "judges:\n", "- name: j\n", "  check: return True\n", "\x00",
    "\ufeff", "\u2028", "key: &x {a: *x}\n",
])
YAML_TEXT = st.lists(YAML_TOKENS | st.text(max_size=10), max_size=30).map("".join)


def dump(document: Any) -> str:
    """YAML for a generated document (non-string keys and odd floats included)."""
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)
