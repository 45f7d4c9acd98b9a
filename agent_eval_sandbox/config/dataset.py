"""The dataset: one sub-directory of `dataset.path` per case.

A case directory holds `input.yaml` (what the agent sees), optionally
`answers.yaml` (AskUserQuestion guidance, kept on the host) and
`annotations.yaml` (metadata for judges); every other file is a case file that
reaches the sandbox only when `dataset.workspace.files` names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.yaml_reader import read_yaml_file, read_yaml_mapping
from agent_eval_sandbox.errors import DatasetError

INPUT_NAMES = ("input.yaml", "input.yml", "input.json")
ANSWERS_NAMES = ("answers.yaml", "answers.yml")
ANNOTATIONS_NAMES = ("annotations.yaml", "annotations.yml")


@dataclass(frozen=True)
class Case:
    id: str
    dir: Path
    input: dict[str, Any]
    input_file: Path
    answers: Any = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def file(self, name: str) -> Path | None:
        path = self.dir / name
        return path if path.is_file() else None


@dataclass
class Dataset:
    root: Path
    cases: list[Case]
    warnings: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [case.id for case in self.cases]


def _first_existing(directory: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def load_case(directory: Path) -> Case | None:
    """Read one case directory; None if it is not a case (no input file)."""
    input_file = _first_existing(directory, INPUT_NAMES)
    if input_file is None:
        return None
    data = read_yaml_mapping(input_file, what="input.yaml")
    answers_file = _first_existing(directory, ANSWERS_NAMES)
    answers = read_yaml_file(answers_file) if answers_file else None
    annotations_file = _first_existing(directory, ANNOTATIONS_NAMES)
    annotations = read_yaml_mapping(annotations_file, what="annotations.yaml") if annotations_file else {}
    return Case(
        id=directory.name,
        dir=directory,
        input=data,
        input_file=input_file,
        answers=answers,
        annotations=annotations,
    )


def load_dataset(loaded: LoadedConfig) -> Dataset:
    """All cases under `dataset.path`, sorted by id (the directory name)."""
    config = loaded.config
    root = loaded.dataset_dir
    if not config.dataset.path:
        raise DatasetError(
            "dataset.path is not set",
            file=loaded.path,
            fix="set dataset.path to the directory holding one sub-directory per case",
        )
    if not root.is_dir():
        raise DatasetError(
            "dataset directory not found" if not root.exists() else "dataset.path is not a directory",
            file=root,
            fix=f"create it or correct dataset.path in {loaded.path.name}",
        )
    cases: list[Case] = []
    warnings: list[str] = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        case = load_case(entry)
        if case is None:
            warnings.append(f"{entry}: no input.yaml; not a case, skipped")
            continue
        cases.append(case)
    if not cases:
        raise DatasetError(
            "no cases found",
            file=root,
            fix="each case is a sub-directory holding an input.yaml mapping",
        )
    files = config.dataset.workspace.files
    if files and not config.is_batch:
        for name in files:
            lacking = [case.id for case in cases if not (case.dir / name).exists()]
            if lacking:
                warnings.append(
                    f"{root}: dataset.workspace.files entry '{name}' is missing in "
                    f"{len(lacking)} of {len(cases)} cases ({', '.join(lacking[:5])})"
                )
    return Dataset(root=root, cases=cases, warnings=warnings)
