from __future__ import annotations

import pytest

from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.errors import TemplateError
from agent_eval_sandbox.runner.plan import plan_invocations


def _plan(write_eval, make_case, eval_text, cases, overrides=CliOverrides()):
    for case_id, text in cases.items():
        make_case(case_id, {"input.yaml": text})
    loaded = load_eval_config(write_eval(eval_text))
    dataset = load_dataset(loaded)
    settings = resolve_run_settings(loaded.config, overrides, num_cases=len(dataset.cases))
    return plan_invocations(loaded.config, dataset.cases, settings)


def test_skill_mode_prompt_is_slash_skill_with_args(write_eval, make_case):
    plan = _plan(write_eval, make_case, "execution: {skill: rfe, arguments: '--p {prio} \"{prompt}\"'}\ndataset: {path: cases}\n",
                 {"c1": "prompt: hi\nprio: P1\n"})
    assert plan[0].prompt == '/rfe --p P1 "hi"'


def test_prompt_mode_uses_rendered_prompt(write_eval, make_case):
    plan = _plan(write_eval, make_case, "execution: {prompt: '{{ input.q }}?'}\ndataset: {path: cases}\n", {"c1": "q: why\n"})
    assert plan[0].prompt == "why?"


def test_skill_args_flag_overrides_template(write_eval, make_case):
    plan = _plan(write_eval, make_case, "execution: {skill: s, arguments: '{prompt}'}\ndataset: {path: cases}\n",
                 {"c1": "other: x\n"}, CliOverrides(skill_args="--only {other}"))
    assert plan[0].prompt == "/s --only x"


def test_missing_field_names_case(write_eval, make_case):
    with pytest.raises(TemplateError) as info:
        _plan(write_eval, make_case, "execution: {skill: s, arguments: '{prompt}'}\ndataset: {path: cases}\n", {"c9": "x: 1\n"})
    assert "case c9" in str(info.value) and "Missing required field in template: prompt" in str(info.value)


def test_batch_mode_prompt_from_first_entry(write_eval, make_case):
    plan = _plan(write_eval, make_case, "execution: {mode: batch, skill: s, arguments: '--input batch.yaml {prompt}'}\ndataset: {path: cases}\n",
                 {"a": "prompt: first\n", "b": "prompt: second\n"})
    assert len(plan) == 1
    assert plan[0].prompt == "/s --input batch.yaml first"
    assert [e["prompt"] for e in plan[0].batch_entries] == ["first", "second"]
    assert [o["case_id"] for o in plan[0].case_order] == ["a", "b"]
