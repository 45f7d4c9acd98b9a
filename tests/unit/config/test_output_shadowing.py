"""An `outputs[].path` never shadows the tool's own record of a case (rundir/layout.CASE_RECORD_NAMES)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.rundir import layout
from agent_eval_sandbox.rundir.layout import CASE_RECORD_NAMES, CaseDir

# The names a case's folder holds, by what they are: each class must be refused as an output path.
NAME_CLASSES = {
    "inputs": [layout.INPUT, layout.PROMPT],
    "logs": [layout.STDOUT_LOG, layout.STDERR_LOG, layout.GATEWAY_LOG, layout.TOOL_DECISIONS],
    "records": [layout.EVENTS, layout.CASE_RESULT, layout.CASE_HOOK_OUTPUTS, layout.TRANSCRIPT],
    "changes": [layout.MODIFIED_DIR, layout.WORKSPACE_DIFF],
    "directories": [layout.SUBAGENTS_DIR, layout.JUDGES_DIR, layout.STEPS_DIR],
    "replay": [layout.CASSETTE, layout.REPLAY_DIFF],
    "scores": [layout.REWARD_JSON],
}


def test_the_classes_cover_every_case_record_name():
    assert {name for names in NAME_CLASSES.values() for name in names} == set(CASE_RECORD_NAMES)


def test_every_file_a_case_dir_names_is_a_case_record_name():
    case = CaseDir(Path("/run/cases/c1"))
    named = {
        getattr(case, attr).name
        for attr, value in vars(CaseDir).items()
        if isinstance(value, property)
    }
    assert named <= set(CASE_RECORD_NAMES), named - set(CASE_RECORD_NAMES)


@pytest.mark.parametrize("name_class", sorted(NAME_CLASSES))
def test_output_paths_starting_with_a_case_record_name_are_refused(write_eval, name_class):
    for name in NAME_CLASSES[name_class]:
        for path in (name, f"{name}/x.md", f"./{name}/", name.upper()):
            with pytest.raises(ConfigError) as info:
                load_eval_config(write_eval(f"outputs: [{{path: artifacts}}, {{path: '{path}'}}]\n"))
            message = str(info.value)
            assert "outputs[1].path starts with" in message and name.lower() in message.lower(), message


@pytest.mark.parametrize("path", ["artifacts", "out/events.json", "output", "stdout", "reports/_modified",
                                  "inputs.yaml.d"])
def test_other_output_paths_are_fine(write_eval, path):
    assert load_eval_config(write_eval(f"outputs: [{{path: '{path}'}}]\n")).config.outputs[0].path == path
