"""comparison.json in the run under test's directory: written by `compare` / `run --baseline`, read by the reports."""

from __future__ import annotations

from pydantic import ValidationError

from agent_eval_sandbox.compare.models import Comparison
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.read import MAX_RECORD_BYTES, MAX_RECORD_NODES, read_data
from agent_eval_sandbox.rundir.write import write_json


def write_comparison(run: RunDir, comparison: Comparison) -> None:
    write_json(run.comparison_json, comparison.to_data())


def read_comparison(run: RunDir) -> tuple[Comparison | None, str | None]:
    """The run's stored comparison (None without one), and the problem when the file is unusable."""
    data, problem = read_data(run.comparison_json, max_bytes=MAX_RECORD_BYTES, max_nodes=MAX_RECORD_NODES)
    if problem or data is None:
        return None, problem
    try:
        return Comparison.model_validate(data), None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"{run.comparison_json}: not a comparison this tool wrote ({where}: {first['msg']})"
