from __future__ import annotations

import pytest

from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.config.yaml_reader import YamlReadError
from agent_eval_sandbox.errors import DatasetError


def test_cases_sorted_and_files_read(write_eval, make_case):
    make_case("b-case", {"input.yaml": "prompt: b\n", "answers.yaml": "q: ok\n", "annotations.yaml": "expected: 1\n"})
    make_case("a-case", {"input.yaml": "prompt: a\n", "reference.md": "gold"})
    dataset = load_dataset(load_eval_config(write_eval("dataset: {path: cases}\n")))
    assert dataset.ids == ["a-case", "b-case"]
    b = dataset.cases[1]
    assert b.input == {"prompt": "b"} and b.answers == {"q": "ok"} and b.annotations == {"expected": 1}
    assert dataset.cases[0].answers is None and dataset.cases[0].file("reference.md") is not None


def test_dirs_without_input_are_skipped_with_warning(write_eval, make_case):
    make_case("case", {"input.yaml": "prompt: a\n"})
    make_case("shared", {"readme.md": "x"})
    dataset = load_dataset(load_eval_config(write_eval("dataset: {path: cases}\n")))
    assert dataset.ids == ["case"]
    assert any("shared" in w and "no input.yaml" in w for w in dataset.warnings)


def test_missing_directory_names_it(write_eval):
    with pytest.raises(DatasetError) as info:
        load_dataset(load_eval_config(write_eval("dataset: {path: nowhere}\n")))
    assert "nowhere" in str(info.value) and "dataset directory not found" in str(info.value)


def test_no_path(write_eval):
    with pytest.raises(DatasetError, match="dataset.path is not set"):
        load_dataset(load_eval_config(write_eval("name: x\n")))


def test_no_cases(write_eval, tmp_path):
    (tmp_path / "cases").mkdir()
    with pytest.raises(DatasetError, match="no cases found"):
        load_dataset(load_eval_config(write_eval("dataset: {path: cases}\n")))


def test_bad_yaml_names_the_file(write_eval, make_case):
    case = make_case("c1", {"input.yaml": "prompt: [oops\n"})
    with pytest.raises(YamlReadError) as info:
        load_dataset(load_eval_config(write_eval("dataset: {path: cases}\n")))
    assert str(case / "input.yaml") in str(info.value)


def test_non_mapping_input_names_the_file(write_eval, make_case):
    case = make_case("c1", {"input.yaml": "- a\n- b\n"})
    with pytest.raises(YamlReadError) as info:
        load_dataset(load_eval_config(write_eval("dataset: {path: cases}\n")))
    assert str(case / "input.yaml") in str(info.value) and "must be a mapping" in str(info.value)


def test_non_mapping_annotations(write_eval, make_case):
    make_case("c1", {"input.yaml": "a: 1\n", "annotations.yaml": "just text\n"})
    with pytest.raises(YamlReadError, match="annotations.yaml must be a mapping"):
        load_dataset(load_eval_config(write_eval("dataset: {path: cases}\n")))


def test_relative_path_resolves_against_eval_yaml_not_cwd(write_eval, make_case, tmp_path, monkeypatch):
    make_case("c1", {"input.yaml": "a: 1\n"}, root="deep/cases")
    path = write_eval("dataset: {path: deep/cases}\n")
    monkeypatch.chdir("/")
    assert load_dataset(load_eval_config(path)).ids == ["c1"]


def test_absolute_path_allowed(write_eval, make_case, tmp_path):
    make_case("c1", {"input.yaml": "a: 1\n"})
    assert load_dataset(load_eval_config(write_eval(f"dataset: {{path: {tmp_path / 'cases'}}}\n"))).ids == ["c1"]


def test_missing_workspace_file_warns(write_eval, make_case):
    make_case("c1", {"input.yaml": "a: 1\n", "src.py": "x"})
    make_case("c2", {"input.yaml": "a: 1\n"})
    dataset = load_dataset(load_eval_config(write_eval("dataset: {path: cases, workspace: {files: [src.py]}}\n")))
    assert any("'src.py' is missing in 1 of 2 cases (c2)" in w for w in dataset.warnings)
