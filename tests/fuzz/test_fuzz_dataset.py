"""Hostile datasets: case directories, input.yaml, answers and annotations, and the
batch planning built on them. Loading, planning and staging end in a clear error
or a clean result, and staging writes only into its destination."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from agent_eval_sandbox.config.dataset import Dataset, load_dataset
from agent_eval_sandbox.config.loader import LoadedConfig, load_eval_config
from agent_eval_sandbox.config.settings import CliOverrides, resolve_run_settings
from agent_eval_sandbox.errors import ConfigError, UserError
from agent_eval_sandbox.runner.batch import assign_files
from agent_eval_sandbox.runner.plan import plan_invocations
from agent_eval_sandbox.runner.workspace import (
    stage_batch_workspace,
    stage_case_workspace,
)

from .checks import outcome, snapshot
from .strategies import VALUES, YAML_TEXT, dump

CASE_NAMES = st.text(min_size=1, max_size=40) | st.sampled_from([".hidden", "..x", "-rf", "a b", "x" * 260, "ü", "\\"])
CONTENT = st.one_of(
    VALUES.map(dump),
    st.dictionaries(st.text(max_size=8), VALUES, max_size=5).map(dump),
    YAML_TEXT,
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
)
# Mostly mappings, so that most datasets load and planning and staging get their turn.
MAPPINGS = st.dictionaries(st.sampled_from(["q", "r", "prompt"]) | st.text(max_size=6), VALUES, max_size=4)
INPUTS = st.one_of(MAPPINGS.map(dump), MAPPINGS.map(lambda m: json.dumps(m, default=str)), MAPPINGS.map(dump), CONTENT)
INPUT_NAMES = st.sampled_from(["input.yaml", "input.yml", "input.json"])
TEMPLATES = st.sampled_from(["{q}", "{q?}", "{q} {r?}", "{{ input.q }}", "{{ input | tojson }}", "{prompt}",
                             "{% for k in input %}{{ k }}{% endfor %}", "{{ input.q.x.y }}", "plain"])
PATTERNS = st.lists(
    st.sampled_from(["{n}", "{n:03d}", "{", "}", "{n.", "real}", "{n[0]}", "{0}", "{x}", "{n!r}", "{n:>{n}}",
                     "RFE-", "*", "%s", "{n.__class__}", "{{", "}}"]) | st.text(max_size=4),
    max_size=5,
).map("".join)


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    except (OSError, ValueError):  # a name the file system refuses is no dataset anyone can have
        return False
    return True


def _make_dataset(root: Path, cases: list[dict[str, Any]]) -> None:
    for case in cases:
        directory = root / "cases" / case["name"]
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError):
            continue
        _write(directory / case["input_name"], case["input"])
        for name in ("answers.yaml", "annotations.yaml", "notes.txt"):
            if name in case:
                _write(directory / name, case[name])


CASES = st.lists(
    st.fixed_dictionaries(
        {"name": CASE_NAMES, "input_name": INPUT_NAMES, "input": INPUTS},
        optional={"answers.yaml": CONTENT, "annotations.yaml": INPUTS, "notes.txt": st.text(max_size=20)},
    ),
    min_size=1,
    max_size=4,
)


def _stage(loaded: LoadedConfig, dataset: Dataset, root: Path) -> None:
    """Plan and stage every invocation; nothing may be written outside `stage/`."""
    config = loaded.config
    settings = outcome(lambda: resolve_run_settings(config, CliOverrides(model="m"), num_cases=len(dataset.cases)))
    if isinstance(settings, UserError):
        return
    invocations = outcome(lambda: plan_invocations(config, dataset.cases, settings))
    if isinstance(invocations, UserError):
        return
    stage = root / "stage"
    before = snapshot(root, skip=[stage])
    for index, invocation in enumerate(invocations):
        dest = stage / str(index)
        if config.is_batch:
            stage_batch_workspace(config, list(invocation.batch_entries), list(invocation.case_order), dest)
        else:
            outcome(lambda case=invocation.cases[0], dest=dest: stage_case_workspace(config, case, dest))
        assert invocation.prompt is not None
    assert snapshot(root, skip=[stage]) == before
    for path in stage.rglob("*"):
        assert not path.is_symlink() and path.resolve().is_relative_to(stage.resolve()), path


@given(CASES, TEMPLATES, st.sampled_from(["case", "batch"]), st.lists(st.sampled_from(["notes.txt", "answers.yaml",
                                                                                       "sub/x", "."]), max_size=2))
def test_datasets_load_plan_and_stage(cases: list[dict[str, Any]], template: str, mode: str,
                                      files: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        execution = {"mode": mode, "prompt": template}
        config = {"execution": execution, "dataset": {"path": "cases", "workspace": {"files": files}},
                  "outputs": [{"path": "out", "batch_pattern": "R-{n}"}]}
        (root / "eval.yaml").write_text(dump(config))
        # A file outside the dataset that a case's links might point at.
        (root / "outside.txt").write_text("q: stolen\n")
        _make_dataset(root, cases)
        loaded = outcome(lambda: load_eval_config(root / "eval.yaml"))
        if isinstance(loaded, UserError):
            return
        dataset = outcome(lambda: load_dataset(loaded))
        event(f"dataset: {type(dataset).__name__}")
        if isinstance(dataset, UserError):
            return
        for case in dataset.cases:
            assert isinstance(case.input, dict) and all(isinstance(k, str) for k in case.input)
            json.dumps(case.input, default=str)  # serialisable for batch.yaml and the judges
        _stage(loaded, dataset, root)


@given(st.lists(st.text(min_size=1, max_size=12).filter(lambda s: "\0" not in s), max_size=8, unique=True),
       st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=4), PATTERNS)
def test_batch_output_assignment(files: list[str], counts: list[int], pattern: str) -> None:
    """`batch_pattern` and the file names come from the config and the sandbox: any mix of them
    assigns only files that exist, or is a one-line ConfigError."""
    order = [{"case_id": f"c{i}", "entry_count": count} for i, count in enumerate(counts)]
    assigned = outcome(lambda: assign_files(files, order, pattern), expected=ConfigError)
    if isinstance(assigned, dict):
        assert set(assigned) == {entry["case_id"] for entry in order}
        assert all(set(names) <= set(files) for names in assigned.values())


def test_a_dataset_link_is_never_staged(tmp_path: Path) -> None:
    """A case's companion file that is a link to a host file stays out of the workspace."""
    (tmp_path / "secret.txt").write_text("host secret\n")
    case = tmp_path / "cases" / "c1"
    case.mkdir(parents=True)
    (case / "input.yaml").write_text("q: hi\n")
    os.symlink(tmp_path / "secret.txt", case / "notes.txt")
    (tmp_path / "eval.yaml").write_text(dump({"execution": {"prompt": "{q}"},
                                              "dataset": {"path": "cases", "workspace": {"files": ["notes.txt"]}}}))
    loaded = load_eval_config(tmp_path / "eval.yaml")
    dataset = load_dataset(loaded)
    report = stage_case_workspace(loaded.config, dataset.cases[0], tmp_path / "stage")
    assert not (tmp_path / "stage" / "notes.txt").exists()
    assert [(skipped.path, skipped.kind) for skipped in report.skipped] == [("notes.txt", "symlink")]
