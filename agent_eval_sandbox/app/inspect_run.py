"""`show RUN_DIR [CASE]` (a case's conversation) and `runs` (the runs of a runs directory).

Both only read the run directory (rundir/); the views are plain data (`--json` prints them as they
are), and the terminal rendering is the last step. Everything shown came from a sandbox, so it is
printed as text, never as rich markup.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.rundir.latest import eval_runs
from agent_eval_sandbox.rundir.layout import RunDir
from agent_eval_sandbox.rundir.read import read_data, read_mapping

# Tool inputs and results can be huge: the terminal gets the start of each.
SHOWN_CHARS = 1200


def case_view(run_dir: Path, case_id: str | None) -> dict[str, Any]:
    """One case's conversation and verdicts (the run's only case, or `case_id`)."""
    run = RunDir(run_dir)
    if not run.run_json.is_file():
        raise UserError(f"{run_dir} is no run directory (no run.json)", fix="give a run directory, or `latest`")
    ids = run.case_dirs()
    if case_id is None:
        if len(ids) != 1:
            raise UserError(f"{run_dir} has {len(ids)} cases; say which: {', '.join(ids[:10])}",
                            fix="agent-eval-sandbox show RUN_DIR CASE")
        case_id = ids[0]
    if case_id not in ids:
        raise UserError(f"{run_dir} has no case {case_id!r}; its cases: {', '.join(ids[:10])}",
                        fix="give one of those ids")
    case = run.case(case_id)
    events, _ = read_data(case.events)
    outcome, _ = read_mapping(case.result)
    summary, _ = read_mapping(run.summary_yaml)
    per_case = summary.get("per_case") if isinstance(summary.get("per_case"), dict) else {}
    verdicts = per_case.get(case_id) if isinstance(per_case, dict) else None
    return {
        "run_dir": str(run_dir),
        "case": case_id,
        "end_reason": outcome.get("end_reason"),
        "exit_code": outcome.get("exit_code"),
        "cost_usd": outcome.get("cost_usd"),
        "error": outcome.get("error"),
        "events": events if isinstance(events, list) else [],
        "final_text": outcome.get("result"),
        "judges": verdicts if isinstance(verdicts, dict) else {},
    }


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"… ({len(text) - SHOWN_CHARS} more chars)"


def render_case(view: Mapping[str, Any], console: Console) -> None:
    console.print(Text(f"{view['case']} — {view['run_dir']}", style="bold"))
    turn = 0
    for event in view["events"]:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "assistant":
            turn += 1
            if event.get("text"):
                console.print(Panel(Text(_cut(event["text"])), title=f"turn {turn}: assistant", title_align="left"))
            for tool in event.get("tools") or []:
                body = Text(_cut(tool.get("input")))
                console.print(Panel(body, title=f"turn {turn}: tool call {tool.get('name')}", title_align="left",
                                    border_style="cyan"))
        elif kind == "tool_result":
            style = "red" if event.get("is_error") else "green"
            console.print(Panel(Text(_cut(event.get("content"))), title=f"result of {event.get('tool_name')}",
                                title_align="left", border_style=style))
        elif kind == "user" and event.get("text"):
            console.print(Panel(Text(_cut(event["text"])), title="user", title_align="left"))
    if view.get("final_text"):
        console.print(Panel(Text(_cut(view["final_text"])), title="final text", title_align="left",
                            border_style="bold"))
    cost = view.get("cost_usd")
    ending = f"end reason: {view.get('end_reason')}, exit code {view.get('exit_code')}"
    console.print(Text(ending + (f", ${cost:.4f}" if isinstance(cost, (int, float)) else "")))
    if view.get("error"):
        console.print(Text(f"error: {view['error']}", style="red"))
    table = Table("judge", "value", "status", "rationale", title="judges")
    for name, verdict in view["judges"].items():
        verdict = verdict if isinstance(verdict, dict) else {}
        table.add_row(Text(str(name)), Text(str(verdict.get("value"))), Text(str(verdict.get("status"))),
                      Text(_cut(verdict.get("rationale", ""))[:200]))
    if view["judges"]:
        console.print(table)
    else:
        console.print(Text("judges: not judged (interrupted runs are judged with `score RUN_DIR`)"))


def runs_view(runs_base: Path) -> list[dict[str, Any]]:
    """Every run under the runs directory, newest first."""
    rows = []
    for root in eval_runs(runs_base):
        run = RunDir(root)
        meta, _ = read_mapping(run.run_json)
        result, _ = read_mapping(run.run_result)
        summary, _ = read_mapping(run.summary_yaml)
        thresholds = summary.get("thresholds") if isinstance(summary.get("thresholds"), dict) else {}
        passed = thresholds.get("passed") if isinstance(thresholds, dict) else None
        if not result:
            verdict = "running or killed"
        elif result.get("interrupted"):
            verdict = "interrupted"
        elif passed is None:
            verdict = "not judged"
        else:
            verdict = "pass" if passed else "FAIL"
        rows.append({
            "run_dir": str(root),
            "eval": meta.get("eval"),
            "run_id": meta.get("run_id", root.name),
            "started_at": meta.get("started_at"),
            "verdict": verdict,
            "interrupted": bool(result.get("interrupted")),
            "cases": result.get("num_cases"),
            "cost_usd": result.get("cost_usd"),
            "offline": meta.get("offline"),
            "rerun_of": meta.get("rerun_of"),
        })
    rows.sort(key=lambda row: row["started_at"] if isinstance(row["started_at"], (int, float)) else 0, reverse=True)
    return rows


def render_runs(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table("started", "eval", "run id", "verdict", "cases", "cost", "run directory")
    for row in rows:
        started = row["started_at"]
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if isinstance(started, (int, float)) else "?"
        cost = row["cost_usd"]
        shown = (f"${cost:.4f}" if isinstance(cost, (int, float)) else "-") + (" (scripted)" if row["offline"] else "")
        table.add_row(when, Text(str(row["eval"])), Text(str(row["run_id"])), row["verdict"],
                      str(row["cases"] if row["cases"] is not None else "-"), shown, Text(row["run_dir"]))
    console.print(table)
