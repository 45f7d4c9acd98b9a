"""Hand-made projects and run directories in the layout of docs/run-directory.md."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

RUN_ID = "20250101-120000-abc123"


def write_tree(root: Path, files: Mapping[str, Any]) -> None:
    """Write `{relative path: content}`: bytes raw, str as text, data as JSON/YAML by suffix."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        elif rel.endswith(".jsonl"):
            path.write_text("".join(json.dumps(item) + "\n" for item in content), encoding="utf-8")
        elif rel.endswith((".yaml", ".yml")):
            path.write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
        else:
            path.write_text(json.dumps(content, indent=2), encoding="utf-8")


def make_project(tmp_path: Path, eval_yaml: str, dataset: Mapping[str, Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> Path:
    """A project dir with eval.yaml and dataset/<case>/{input,annotations}.yaml; returns eval.yaml."""
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "eval.yaml").write_text(textwrap.dedent(eval_yaml), encoding="utf-8")
    for case_id, case in dataset.items():
        files: dict[str, Any] = {f"dataset/{case_id}/input.yaml": case.get("input", {"prompt": f"task {case_id}"})}
        if "annotations" in case:
            files[f"dataset/{case_id}/annotations.yaml"] = case["annotations"]
        write_tree(project, files)
    write_tree(project, extra or {})
    return project / "eval.yaml"


def assistant(text: str = "", tools: list[dict[str, Any]] | None = None, *, thinking: str | None = None,
              parent: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "assistant", "text": text, "tools": tools or [], "timestamp": None}
    if thinking:
        event["thinking"] = thinking
    if parent:
        event["parent_tool_use_id"] = parent
    return event


def tool(name: str, tool_id: str, **tool_input: Any) -> dict[str, Any]:
    return {"name": name, "id": tool_id, "input": tool_input}


def tool_result(tool_id: str, content: str, *, is_error: bool = False, name: str = "") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "tool_name": name, "content": content,
            "is_error": is_error, "timestamp": None}


def result_event(cost: float = 0.01, turns: int = 2) -> dict[str, Any]:
    return {"type": "result", "cost_usd": cost, "num_turns": turns, "timestamp": None}


def case_result(**overrides: Any) -> dict[str, Any]:
    data = {
        "exit_code": 0, "end_reason": "exited", "duration_s": 12.5,
        "token_usage": {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 3000},
        "cost_usd": 0.02, "num_turns": 3, "permission_denials": [], "limits_hit": [],
        "session_id": "s-1", "result": "Done.", "error": None,
    }
    data.update(overrides)
    return data


def make_run(
    tmp_path: Path,
    config_path: Path | None,
    cases: Mapping[str, Mapping[str, Any]],
    *,
    run_files: Mapping[str, Any] | None = None,
    execution_mode: str = "case",
) -> Path:
    """A finished run: run.json, run_result.json (per_case from each case's run_result.json), cases/<id>/…"""
    root = tmp_path / "runs" / "demo" / RUN_ID
    root.mkdir(parents=True)
    per_case = {cid: files["run_result.json"] for cid, files in cases.items() if "run_result.json" in files}
    meta = {"run_id": RUN_ID, "version": "0.1.0", "started_at": "2025-01-01T12:00:00Z"}
    if config_path is not None:
        meta["config_path"] = str(config_path)
        meta["project_root"] = str(config_path.parent)
    write_tree(root, {
        "run.json": meta,
        "run_result.json": {
            "exit_code": 0, "duration_s": 10.0, "wall_clock_s": 10.0, "cost_usd": 0.5,
            "token_usage": {"input": 1000, "output": 100, "cache_read": 4000, "cache_create": 0},
            "num_turns": 6, "num_cases": len(cases), "execution_mode": execution_mode, "per_case": per_case,
        },
        **(run_files or {}),
    })
    (root / "cases").mkdir(exist_ok=True)
    for case_id, files in cases.items():
        (root / "cases" / case_id).mkdir(parents=True, exist_ok=True)
        write_tree(root / "cases" / case_id, files)
    return root
