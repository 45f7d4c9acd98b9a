"""eval.yaml from hell: loading and `validate` end in a clear error or a clean result."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from agent_eval_sandbox.cli import cli
from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config

from .checks import outcome, snapshot
from .strategies import EVAL_CONFIGS, YAML_TEXT, dump


def _load(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "eval.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        before = snapshot(root)
        result = outcome(lambda: load_eval_config(path))
        assert snapshot(root) == before  # loading writes nothing
        if isinstance(result, LoadedConfig):
            assert result.path == path.resolve()


@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    _load(data)


@given(YAML_TEXT)
def test_yaml_parser_corners(text: str) -> None:
    _load(text)


@given(EVAL_CONFIGS)
def test_structured_configs(document: dict[str, Any]) -> None:
    _load(dump(document))


@given(EVAL_CONFIGS, st.sampled_from(["{q}", "{q?} {r}", "{{ input.q }}", "{{ input | tojson }}", "{prompt}"]))
def test_validate_command(document: dict[str, Any], template: str) -> None:
    """The CLI: exit 0 with a summary, or exit 2 with exactly one `error:` line; never a traceback."""
    document = {**document, "dataset": {"path": "cases"}}
    execution = document.get("execution")
    if isinstance(execution, dict):
        document["execution"] = {**execution, "arguments": template}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "eval.yaml").write_text(dump(document))
        (root / "cases" / "c1").mkdir(parents=True)
        (root / "cases" / "c1" / "input.yaml").write_text("q: hello\nprompt: hi\n")
        before = snapshot(root)
        result = CliRunner().invoke(cli, ["validate", str(root / "eval.yaml")])
        assert snapshot(root) == before
    assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
    stderr = result.stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    if result.exit_code == 2:
        assert len(errors) == 1 and stderr.rstrip().endswith(errors[0]), stderr
    else:
        assert errors == [] and ": OK" in result.stdout
