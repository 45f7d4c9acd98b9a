"""A process started by step 1 of a pipeline kept working in steps 2 and 3 (found by an outside red team).

Step `first` (its own timeout: 20 s) starts a detached python process and ends at once.
The process, for 60 s, appends a timestamp to /workspace/bg/bg.log every 0.5 s and sends a
Messages request (marked BGSPEND) straight to the gateway socket every 2 s. Steps `second`
and `third` only sleep. The promise: a step's budget and deadline cannot be escaped by a
background process that keeps writing or spending in later steps or after the case. What each step
leaves running is killed when it ends, before its files and costs are taken.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from .conftest import AttackRun, bash, final, make_project, run_attack, write, write_eval

pytestmark = pytest.mark.docker

MARK = "BGSP" + "END"
BG = textwrap.dedent(f"""
    import json, os, socket, time
    os.makedirs("/workspace/bg", exist_ok=True)
    start = time.time()
    n = 0
    while time.time() - start < 60:
        with open('/workspace/bg/bg.log', 'a') as f:
            f.write('tick %.3f\\n' % time.time())
        if n % 4 == 0:
            body = json.dumps({{"model": "claude-sonnet-4-6", "max_tokens": 2000,
                               "messages": [{{"role": "user", "content": "{MARK}" + str(n)}}]}}).encode()
            head = ("POST /v1/messages HTTP/1.1\\r\\nHost: g\\r\\nContent-Type: application/json\\r\\n"
                    "anthropic-version: 2023-06-01\\r\\nx-api-key: x\\r\\nConnection: close\\r\\n"
                    "Content-Length: %d\\r\\n\\r\\n" % len(body)).encode()
            try:
                s = socket.socket(socket.AF_UNIX); s.settimeout(10)
                s.connect('/run/agent-eval/gateway.sock'); s.sendall(head + body)
                status = s.recv(64).split(b' ')[1].decode(); s.close()
            except Exception as e:
                status = type(e).__name__
            with open('/workspace/bg/bg.log', 'a') as f:
                f.write('spend %.3f %s\\n' % (time.time(), status))
        n += 1
        time.sleep(0.5)
""")


@pytest.fixture(scope="module")
def bg_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "rt3-bg", runtime)
    write_eval(project, """
        name: attack-rt3-bg
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
        outputs: [{path: bg}]
        execution:
          timeout: 120
          steps:
            - {id: first, prompt: "start", timeout: 20}
            - {id: second, prompt: "wait"}
            - {id: third, prompt: "wait more"}
    """, runtime)
    first = [write("/workspace/.bg.py", BG),
             bash("setsid nohup python3 /workspace/.bg.py >/dev/null 2>&1 < /dev/null & echo started"),
             final("first done")]
    second = [bash("sleep 6; echo slept"), final("second done")]
    third = [bash("sleep 6; echo slept"), final("third done")]
    project.case("c1", {"q": "x"}, files={
        "model_script.first.yaml": yaml.safe_dump(first, sort_keys=False),
        "model_script.second.yaml": yaml.safe_dump(second, sort_keys=False),
        "model_script.third.yaml": yaml.safe_dump(third, sort_keys=False),
    })
    return run_attack(project, runtime, "rt3-bg", "--offline")


def _bg_log(run: AttackRun) -> list[list[str]]:
    case = run.result.case("c1")
    found = [p for p in case.rglob("bg.log")]
    assert found, sorted(str(p.relative_to(case)) for p in case.rglob("*"))[:50]
    return [line.split() for line in found[0].read_text().splitlines() if line.strip()]


def _steps(run: AttackRun) -> dict:
    return {s["step_id"]: s for s in run.entry("c1")["steps"]}


def test_step_one_process_does_not_write_during_later_steps(bg_run: AttackRun) -> None:
    steps = _steps(bg_run)
    first_end = steps["first"]["started_at"] + steps["first"]["duration_s"]
    late = [line for line in _bg_log(bg_run) if float(line[1]) > first_end + 1.0]
    assert late == [], f"{len(late)} lines written by step first's process after it ended, e.g. {late[:3]} {late[-3:]}"


def test_step_one_process_does_not_spend_during_later_steps_or_after(bg_run: AttackRun) -> None:
    steps = _steps(bg_run)
    first_end = steps["first"]["started_at"] + steps["first"]["duration_s"]
    spends = [line for line in _bg_log(bg_run) if line[0] == "spend" and float(line[1]) > first_end + 1.0]
    admitted = [line for line in spends if line[2] == "200"]
    assert admitted == [], f"{len(admitted)} model requests of step first's process admitted after it ended: {admitted}"


def test_every_charge_is_in_the_case_cost(bg_run: AttackRun) -> None:
    entry = bg_run.entry("c1")
    lines = [json.loads(line) for line in (bg_run.result.case("c1") / "gateway.jsonl").read_text().splitlines()]
    charged = sum(rec.get("cost_usd") or 0.0 for rec in lines)
    assert abs(charged - entry["cost_usd"]) < 1e-6, (charged, entry["cost_usd"])
    steps_sum = sum(s.get("cost_usd") or 0.0 for s in entry["steps"])
    assert abs(steps_sum - entry["cost_usd"]) < 1e-6, ("steps", steps_sum, entry["cost_usd"])


def test_a_later_step_s_files_are_its_own(bg_run: AttackRun) -> None:
    """Steps second and third only slept: `files` (and {{ steps.<id>.files }}) must not credit them with
    what step first's process wrote."""
    steps = _steps(bg_run)
    assert steps["second"]["files"] == [] and steps["third"]["files"] == [], (steps["second"]["files"],
                                                                              steps["third"]["files"])


def test_a_later_step_is_not_charged_for_step_one_s_requests(bg_run: AttackRun) -> None:
    """Each sleeping step's own CLI makes 2 requests; the rest of what its channel counted is step first's."""
    steps = _steps(bg_run)
    counted = {sid: steps[sid]["gateway"]["requests"] for sid in ("second", "third")}
    assert counted == {"second": 2, "third": 2}, counted
