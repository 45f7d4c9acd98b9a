"""The JSON Schema of eval.yaml: every eval the project ships and the reference's examples validate;
a misspelt key does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent_eval_sandbox.app.scaffold import scaffold_files
from agent_eval_sandbox.config.schema import eval_schema

PROJECT = Path(__file__).resolve().parents[3]
REFERENCE_EXAMPLES = Path("/work/shared/reference/agent-eval-harness/examples")
PROJECT_EVALS = sorted(p for p in PROJECT.glob("**/eval.yaml")
                       if ".venv" not in p.parts and "runs" not in p.parts)


def _validator() -> jsonschema.Draft202012Validator:
    schema = eval_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(document: Any) -> list[str]:
    """Every error, with the ones under an anyOf (a block or null) spelt out."""
    def flat(errors: Any) -> list[str]:
        return [line for e in errors for line in [f"{list(e.absolute_path)}: {e.message}", *flat(e.context)]]
    return flat(_validator().iter_errors(document))


def test_the_project_ships_evals_to_check() -> None:
    assert any(p.parent.name == "quickstart" for p in PROJECT_EVALS), PROJECT_EVALS


@pytest.mark.parametrize("path", PROJECT_EVALS, ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_project_eval_validates(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    errors = _errors(document)
    if path.parent.name == "misspelled-judges":  # the fixture that exists to be misspelt
        assert any("'judgs' was unexpected" in e for e in errors), errors
    else:
        assert errors == []


def test_the_reference_examples_validate() -> None:
    if not REFERENCE_EXAMPLES.is_dir():
        pytest.skip("the reference examples are not on this machine")  # only this part depends on them
    examples = sorted(REFERENCE_EXAMPLES.glob("*.yaml"))
    assert examples
    for path in examples:
        assert _errors(yaml.safe_load(path.read_text())) == [], path


def test_the_init_eval_validates() -> None:
    assert _errors(yaml.safe_load(scaffold_files("x")["eval.yaml"])) == []


@pytest.mark.parametrize(("document", "key"), [
    ({"name": "x", "judgse": []}, "judgse"),
    ({"execution": {"skil": "greeter"}}, "skil"),
    ({"judges": [{"name": "a", "chek": "return True"}]}, "chek"),
    ({"thresholds": {"a": {"min_pass_rat": 1.0}}}, "min_pass_rat"),
    ({"sandbox": {"memroy": "1g"}}, "memroy"),
])
def test_a_misspelt_key_is_rejected(document: dict[str, Any], key: str) -> None:
    errors = _errors(document)
    assert any(f"'{key}' was unexpected" in e for e in errors), errors


def test_wrong_types_are_rejected() -> None:
    assert _errors({"execution": {"timeout": "soon"}})
    assert _errors({"judges": {"name": "a"}})


def test_reference_keys_not_implemented_and_empty_blocks_are_accepted() -> None:
    assert _errors({"mlflow": {"experiment": "x"}, "matrix": {"models": ["a"]}, "execution": None,
                    "judges": None}) == []


def test_keys_have_descriptions() -> None:
    schema = eval_schema()
    assert "skill under test" in schema["$defs"]["ExecutionConfig"]["properties"]["skill"]["description"]
    assert schema["properties"]["judges"]["description"]
    assert all("description" in prop for prop in schema["properties"].values())
