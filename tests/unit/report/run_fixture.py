"""Run directories a reader of report.html meets: a failing run and an interrupted one.

Built by hand in the layout of docs/run-directory.md (the runner is not involved):
cases that pass, fail a judge, time out, never ran, hit an infrastructure error or
were interrupted, with conversations, prompts, inputs, outputs and diffs — and
hostile text in every place a sandbox can put it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.unit.judges.rundir_fixture import (
    assistant,
    case_result,
    make_project,
    make_run,
    result_event,
    tool,
    tool_result,
    write_tree,
)

SCRIPT = "<script>document.body.setAttribute('data-pwned','yes')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
HOSTILE_CASE = 'evil-<i>"2"&amp;'
SECRET_LATE = "TAIL-MARKER-beyond-the-cap"
NON_UTF8_NAME = b"caf\xe9-\xff.txt"

EVAL = """
name: browser
title: Browser check
dataset: {path: dataset}
outputs: [{path: artifacts}]
judges:
  - name: greeted
    check: |
      text = outputs.get("artifacts_content") or ""
      return "Hello" in text, "artifact says: " + text[:200]
  - name: tidy
    check: |
      return 2 if "messy" in (outputs.get("artifacts_content") or "") else 5, "tidiness by eye"
    score_range: [1, 5]
thresholds:
  greeted: {min_pass_rate: 0.9}
  tidy: {min_mean: 3}
"""


def _ran(**overrides: Any) -> dict[str, Any]:
    """A case outcome whose agent ran (agent_duration_s set)."""
    overrides.setdefault("integrity", {"checked": True, "dropped": 0, "unverified": 0, "findings": []})
    return case_result(agent_duration_s=overrides.pop("agent_duration_s", 9.5), **overrides)


def _ok_case(name: str) -> dict[str, Any]:
    return {
        "run_result.json": _ran(case_id=name, result=f"I wrote artifacts/greeting.md for {name}."),
        "prompt.txt": f"/greeter {name}",
        "input.yaml": {"name": name},
        "events.json": [
            {"type": "system", "subtype": "init", "model": "claude-sonnet-4-6", "timestamp": None},
            assistant("I'll write the greeting.", [tool("Bash", "t1", command=f"printf 'Hello, {name}!' > artifacts/greeting.md")]),
            tool_result("t1", "", name="Bash"),
            assistant(f"I wrote artifacts/greeting.md for {name}."),
            result_event(),
        ],
        "artifacts/greeting.md": f"Hello, {name}!",
        "workspace.diff": f"--- /dev/null\n+++ b/artifacts/greeting.md\n@@ -0,0 +1 @@\n+Hello, {name}!\n",
        "stdout.log": "{}\n",
    }


def _hostile_case() -> dict[str, Any]:
    long_text = "\n".join(f"line {i} of a long answer" for i in range(200)) + "\n" + SECRET_LATE
    events = [
        {"type": "system", "subtype": "init", "model": "claude-sonnet-4-6", "timestamp": None},
        assistant(f"Let me look {SCRIPT}", [tool("Read", "t1", file_path=f"/workspace/{IMG}.md")],
                  thinking="The user wants a greeting; I'll be messy instead."),
        tool_result("t1", f"{SCRIPT} file contents", name="Read"),
        assistant("", [tool("Write", "t2", file_path="/workspace/artifacts/greeting.md", content=f"messy {SCRIPT}")]),
        {**tool_result("t2", "permission denied: /workspace/artifacts", is_error=True, name="Write"), "unverified": True},
        assistant("", [tool("Task", "t3", description="delegate", prompt="write it for me")]),
        {**assistant("subagent reporting", [tool("Bash", "t4", command="echo from-the-subagent")]),
         "parent_tool_use_id": "t3"},
        {**tool_result("t4", "from-the-subagent", name="Bash"), "parent_tool_use_id": "t3"},
        tool_result("t3", "the subagent is done", name="Task"),
        assistant(long_text),
        result_event(cost=0.03, turns=4),
    ]
    integrity = {"checked": True, "dropped": 1, "unverified": 1,
                 "findings": [{"line": 7, "kind": "assistant", "reason": f"a text block the model never sent {SCRIPT}"}]}
    return {
        "run_result.json": _ran(case_id=HOSTILE_CASE, exit_code=0, result=f"Done {SCRIPT}", integrity=integrity,
                                changes={"added": ["artifacts/greeting.md"], "modified": [], "deleted": ["notes.txt"],
                                         "counts": {"added": 1, "modified": 0, "deleted": 1}}),
        "prompt.txt": f"/greeter {SCRIPT}",
        "input.yaml": {"name": SCRIPT},
        "events.json": events,
        "artifacts/greeting.md": f"messy {SCRIPT}{IMG}",
        "artifacts/picture.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00binary",
        "workspace.diff": f"--- a/notes.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-{SCRIPT}\n",
    }


def make_failing_run(tmp_path: Path) -> Path:
    """A finished run with a pass, a failing verdict, a timeout, a case that never ran and an infra error."""
    cases = ["001-ada", HOSTILE_CASE, "003-slow", "004-broken-script", "005-gateway-reset"]
    config = make_project(tmp_path, EVAL, {case: {} for case in cases})
    run = make_run(tmp_path, config, {
        "001-ada": _ok_case("Ada"),
        HOSTILE_CASE: _hostile_case(),
        "003-slow": {
            "run_result.json": _ran(case_id="003-slow", end_reason="timed_out", exit_code=-1, result=None,
                                    limits_hit=["timeout"]),
            "prompt.txt": "/greeter Slow",
            "events.json": [assistant("Thinking hard…", [tool("Bash", "t1", command="sleep 999")])],
        },
        "004-broken-script": {
            "run_result.json": case_result(case_id="004-broken-script", end_reason="error", exit_code=None,
                                           duration_s=0.4, cost_usd=None, num_turns=None, result=None,
                                           error="model_script.yaml: step 2: unknown key 'toolz' (did you mean 'tools'?)"),
            "prompt.txt": "/greeter Broken",
        },
        "005-gateway-reset": {
            "run_result.json": case_result(case_id="005-gateway-reset", end_reason="infra_error", exit_code=None,
                                           duration_s=0.2, cost_usd=None, num_turns=None, result=None, error="the gateway reset the connection (ECONNRESET) before"
                                           " any request was logged"),
        },
    })
    # A file name that is not UTF-8, as a sandbox can leave it.
    (run / "cases" / HOSTILE_CASE / "artifacts" / os.fsdecode(NON_UTF8_NAME)).write_text("bytes for a name")
    _stamp_run(run, offline=True)
    return run


def make_interrupted_run(tmp_path: Path) -> Path:
    """A run stopped by Ctrl-C: two cases finished, one was killed mid-way, one never started."""
    cases = ["001-ada", "002-grace", "003-killed", "004-queued"]
    config = make_project(tmp_path, EVAL, {case: {} for case in cases})
    run = make_run(tmp_path, config, {
        "001-ada": _ok_case("Ada"),
        "002-grace": _ok_case("Grace"),
        "003-killed": {
            "run_result.json": _ran(case_id="003-killed", end_reason="interrupted", exit_code=None, result=None,
                                    error="the run was interrupted (SIGINT) while the agent ran"),
            "prompt.txt": "/greeter Killed",
            "events.json": [assistant("Starting…", [tool("Bash", "t1", command="printf 'Hello' > artifacts/x")])],
        },
        "004-queued": {
            "run_result.json": case_result(case_id="004-queued", end_reason="interrupted", exit_code=None,
                                           duration_s=None, cost_usd=None, num_turns=None, result=None,
                                           error="the run was interrupted before this case started"),
        },
    })
    _stamp_run(run, offline=False, interrupted=True, planned=4, finished=2)
    return run


def _stamp_run(run: Path, *, offline: bool, **result: Any) -> None:
    """run.json and run_result.json as a run writes them (the header's facts)."""
    meta = json.loads((run / "run.json").read_text())
    meta.update({"eval": "browser", "offline": offline, "image": "agent-eval-sandbox:2.1.332-test",
                 "claude_version": "2.1.332", "mode": "case", "started_at": 1_735_732_800.0,
                 "settings": {"timeout_s": 120, "max_budget_usd": 0.5, "parallelism": 2, "model": "claude-sonnet-4-6"}})
    data = json.loads((run / "run_result.json").read_text())
    data.update({"wall_clock_s": 73.2, "cost_usd": 0.1234, "model": "claude-sonnet-4-6", "agent_version": "2.1.332",
                 "token_usage": {"input_tokens": 12345, "output_tokens": 678, "cache_read_input_tokens": 9000,
                                 "cache_creation_input_tokens": 0}, **result})
    write_tree(run, {"run.json": meta, "run_result.json": data})
