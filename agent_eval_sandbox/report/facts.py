"""Per-case facts of a run for the reports: how each case ended, what it cost, where its logs are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agent_eval_sandbox.judges.finished_run import FinishedRun, read_mapping

# (file in cases/<id>/ or the run root, link label), in the order the report lists them.
CASE_LINKS = (
    ("transcript.jsonl", "transcript"),
    ("stdout.log", "stdout"),
    ("stderr.log", "stderr"),
    ("events.json", "events"),
    ("gateway.jsonl", "gateway log"),
    ("tool_decisions.jsonl", "tool decisions"),
    ("workspace.diff", "diff"),
)
RUN_LINKS = (("stdout.log", "stdout"), ("stderr.log", "stderr"), ("events.json", "events"), ("run_result.json", "run_result.json"))


@dataclass(frozen=True)
class Link:
    label: str
    href: str  # relative to the run directory, URL-quoted


@dataclass(frozen=True)
class CaseFacts:
    end_reason: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    cost_usd: float | None = None
    num_turns: int | None = None
    links: tuple[Link, ...] = ()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def facts_from(result: Mapping[str, Any], links: tuple[Link, ...] = ()) -> CaseFacts:
    end_reason = result.get("end_reason")
    return CaseFacts(
        end_reason=end_reason if isinstance(end_reason, str) else None,
        exit_code=_int(result.get("exit_code")),
        duration_s=_number(result.get("duration_s")),
        cost_usd=_number(result.get("cost_usd")),
        num_turns=_int(result.get("num_turns")),
        links=links,
    )


def _links(root: Path, prefix: str, names: tuple[tuple[str, str], ...]) -> tuple[Link, ...]:
    return tuple(
        Link(label, quote(f"{prefix}{name}"))
        for name, label in names
        if (root / prefix / name).is_file()
    )


def read_case_facts(run: FinishedRun, case_ids: list[str]) -> dict[str, CaseFacts]:
    """Each case's facts: cases/<id>/run_result.json, else run_result.json's per_case entry."""
    facts = {}
    for case_id in case_ids:
        own, _ = read_mapping(run.case_dir(case_id) / "run_result.json")
        merged = {**run.per_case(case_id), **own}
        facts[case_id] = facts_from(merged, _links(run.root, f"cases/{case_id}/", CASE_LINKS))
    return facts


def run_links(run: FinishedRun) -> tuple[Link, ...]:
    return _links(run.root, "", RUN_LINKS)
