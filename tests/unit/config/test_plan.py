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
    return plan_invocations(loaded.config, dataset.cases, settings, eval_file=loaded.path)


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


def test_missing_field_names_case(write_eval, make_case, tmp_path):
    with pytest.raises(TemplateError) as info:
        _plan(write_eval, make_case, "execution: {skill: s, arguments: '{prompt}'}\ndataset: {path: cases}\n", {"c9": "x: 1\n"})
    message = str(info.value)
    assert "case c9" in message and "Missing required field in template: prompt" in message
    # The case's input.yaml and the eval file with the template's field, so both places to fix are named.
    assert message.startswith(f"{tmp_path / 'cases' / 'c9' / 'input.yaml'}: ")
    assert f"(template: {tmp_path / 'eval.yaml'}: execution.arguments)" in message


def test_template_error_from_skill_args_names_the_flag(write_eval, make_case, tmp_path):
    with pytest.raises(TemplateError) as info:
        _plan(write_eval, make_case, "execution: {prompt: p}\ndataset: {path: cases}\n", {"c1": "x: 1\n"},
              CliOverrides(skill_args="{missing}"))
    assert "input.yaml" in str(info.value) and "(template: --skill-args)" in str(info.value)


def test_batch_template_error_names_the_first_case_and_the_eval_file(write_eval, make_case, tmp_path):
    with pytest.raises(TemplateError) as info:
        _plan(write_eval, make_case, "execution: {mode: batch, prompt: '{{ input.nope }}'}\ndataset: {path: cases}\n",
              {"a": "prompt: first\n"})
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'cases' / 'a' / 'input.yaml'}: batch (first entry of batch.yaml)")
    assert f"{tmp_path / 'eval.yaml'}: execution.prompt" in message


def test_batch_mode_prompt_from_first_entry(write_eval, make_case):
    plan = _plan(write_eval, make_case, "execution: {mode: batch, skill: s, arguments: '--input batch.yaml {prompt}'}\ndataset: {path: cases}\n",
                 {"a": "prompt: first\n", "b": "prompt: second\n"})
    assert len(plan) == 1
    assert plan[0].prompt == "/s --input batch.yaml first"
    assert [e["prompt"] for e in plan[0].batch_entries] == ["first", "second"]
    assert [o["case_id"] for o in plan[0].case_order] == ["a", "b"]
