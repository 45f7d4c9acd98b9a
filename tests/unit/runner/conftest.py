from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_eval_sandbox.runner import case
from agent_eval_sandbox.sandbox.fake import FakeBackend
from tests.unit.runner.fake_cli import FakeCli
from tests.unit.runner.pipeline_fixture import Pipeline, Project, build_pipeline


@pytest.fixture(autouse=True)
def no_waits_between_sandbox_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(case, "CREATE_RETRY_DELAYS_S", (0.0, 0.0))


@pytest.fixture
def eval_project(tmp_path: Path) -> Project:
    return Project(tmp_path / "project")


@pytest.fixture
def cli() -> FakeCli:
    return FakeCli()


@pytest.fixture
def backend(cli: FakeCli) -> Iterator[FakeBackend]:
    with FakeBackend(cli) as fake:
        yield fake


@pytest.fixture
def make_pipeline(eval_project: Project, backend: FakeBackend) -> Iterator[Callable[..., Pipeline]]:
    """Build the run's context once the project is written: `make_pipeline(timeout=1)`."""
    built: list[Pipeline] = []

    def make(**options: Any) -> Pipeline:
        pipeline = build_pipeline(eval_project.root, backend, **options)
        built.append(pipeline)
        return pipeline

    yield make
    for pipeline in built:
        pipeline.close()
