"""The main job, end to end: the real CLI in the real sandbox, the scripted model
behind the real gateway, results collected into the run directory."""

from __future__ import annotations

import json
import re
import time

import pytest

from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import parse_script
from tests.integration.host_network import listening_on_host

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: writes files\n---\nDo what the arguments say.\n"


def _skill_project(project, extra_eval: str = "") -> None:
    project.eval_yaml(f"""
        name: e2e
        execution: {{skill: scribe, arguments: "{{task}}", timeout: 120, max_budget_usd: 5}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases, workspace: {{files: [seed.txt]}}}}
        outputs: [{{path: out}}]
        {extra_eval}
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)


def test_scripted_tool_call_changes_workspace_and_everything_is_collected(project):
    _skill_project(project)
    project.case(
        "c1",
        {"task": "write hello"},
        script=[
            {"tool": "Bash", "input": {"command": "mkdir -p out && echo hi-$(id -un) > out/hello.txt && echo edited >> seed.txt"}},
            {"text": "All done."},
        ],
        files={"seed.txt": "seed\n", "answers.yaml": "secret: never-in-sandbox\n"},
    )
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    case = result.case("c1")
    entry = result.case_result("c1")
    assert entry["exit_code"] == 0 and entry["end_reason"] == "exited"
    assert (case / "out" / "hello.txt").read_text() == "hi-agent\n"
    assert (case / "_modified" / "seed.txt").read_text() == "seed\nedited\n"
    assert "+edited" in (case / "workspace.diff").read_text()
    # usage, turns, cost and the result text come from the CLI's own result event
    assert entry["num_turns"] == 2 and entry["result"] == "All done."
    assert entry["token_usage"]["input_tokens"] > 0 and entry["cost_usd"] > 0
    # the session transcript is the CLI's own jsonl for this session
    transcript = [json.loads(line) for line in (case / "transcript.jsonl").read_text().splitlines()]
    assert any(item.get("sessionId") == entry["session_id"] for item in transcript)
    # the gateway logged both model calls
    requests = [json.loads(line) for line in (case / "gateway.jsonl").read_text().splitlines()]
    assert len([r for r in requests if r.get("path", "").startswith("/v1/messages")]) >= 2
    # the prompt the agent got is /skill + rendered arguments
    assert (case / "input.yaml").exists()
    tool_results = result.tool_results("c1")
    assert tool_results and not any("never-in-sandbox" in text for text in tool_results)
    run_result = json.loads((result.run_dir / "run_result.json").read_text())
    assert run_result["num_cases"] == 1 and run_result["execution_mode"] == "case"


def test_a_bash_call_the_cli_prints_without_its_cd_is_kept_with_its_result(project):
    """The real CLI prints `cd /workspace && …` as `…` in its stream; the check against the
    gateway's record once dropped such a call, and its result, as forged (real work hidden).
    A `cd` the CLI prints as sent, and one to another directory, must be kept just as well."""
    _skill_project(project)
    commands = ["cd /workspace && echo one > out-1.txt && cat out-1.txt",
                "cd /workspace; echo two > out-2.txt && cat out-2.txt",
                "cd /tmp && pwd"]
    project.case("c1", {"task": "write"},
                 script=[*({"tool": "Bash", "input": {"command": c}} for c in commands), {"text": "Written."}],
                 files={"seed.txt": "seed\n"})
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    entry = result.case_result("c1")
    assert entry["integrity"] == {"checked": True, "dropped": 0, "unverified": 0, "findings": []}, entry["integrity"]
    shown = [t["input"]["command"] for e in result.events("c1") if e["type"] == "assistant" for t in e["tools"]]
    # what this check is about: the CLI still leaves that `cd` out (if it stops, this test says so)
    assert shown == ["echo one > out-1.txt && cat out-1.txt", commands[1], commands[2]], shown
    results = [r.strip() for r in result.tool_results("c1")]
    # (the CLI adds "Shell cwd was reset to /workspace" to the last)
    assert results[:2] == ["one", "two"] and results[2].startswith("/tmp\n"), results
    assert entry["result"] == "Written." and entry["num_turns"] == 4


def test_case_over_budget_ends_with_budget_exhausted(project):
    """The CLI's own --max-budget-usd (passed by the runner) stops the session.

    The gateway's reservation bounds the input side by the request's size; the
    scripted usage reports more input than the CLI's ~88 KB request can hold (as
    a PDF could). The gateway admitted the request on its estimate and charges
    what was reported; the CLI sees the cost over its budget and stops itself
    before the next request, which the gateway never has to refuse."""
    _skill_project(project)
    project.eval_yaml("""
        name: e2e-budget
        execution: {skill: scribe, arguments: "{task}", timeout: 120, max_budget_usd: 0.25}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
    """)
    project.case("c1", {"task": "spend"}, script=[
        {"tool": "Bash", "input": {"command": "echo one"}, "usage": {"input_tokens": 100000, "output_tokens": 10}},
        {"tool": "Bash", "input": {"command": "echo two"}},
        {"text": "never reached"},
    ])
    result = project.run("--offline")
    assert result.process.returncode == 1, result.process.stderr  # its only case hit its budget: nothing completed
    entry = result.case_result("c1")
    assert entry["end_reason"] == "budget_exhausted" and "budget" in entry["limits_hit"]
    assert not any(t.strip() == "two" for t in result.tool_results("c1"))
    assert entry["gateway"]["refused"] == 0 and entry["cli_cost_usd"] >= 0.25


def test_gateway_stops_a_case_that_bypasses_the_cli_budget(project):
    """The skill runs its own nested `claude` (no budget flag): only the gateway,
    which sees every request of the case, can stop the spending."""
    _skill_project(project)
    project.eval_yaml("""
        name: e2e-gateway-budget
        execution: {skill: scribe, arguments: "{task}", timeout: 180, max_budget_usd: 0.5}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
    """)
    nested = ("echo spend | claude -p --model claude-sonnet-4-6 --permission-mode bypassPermissions"
              " --output-format text; echo nested-exit=$?")
    # Every request (outer or nested) without assistant turns gets step 0: each
    # nested CLI starts another one, until the gateway refuses. Each request
    # reserves ~$0.19 ($0.175 for its ~88 KB of input at most, 1,024 output tokens
    # at least) and costs $0.06 (20k input tokens, within what its size allows):
    # after a few, what is left cannot cover the next reservation.
    project.case("c1", {"task": "spend"}, script=[
        {"tool": "Bash", "input": {"command": nested}, "usage": {"input_tokens": 20000, "output_tokens": 10}},
        {"text": "outer done", "usage": {"input_tokens": 20000, "output_tokens": 10}},
    ])
    started = time.monotonic()
    result = project.run("--offline")
    elapsed = time.monotonic() - started
    assert result.process.returncode == 1, result.process.stderr  # its only case hit its budget: nothing completed
    entry = result.case_result("c1")
    assert entry["gateway"]["refused"] >= 1
    assert entry["end_reason"] == "budget_exhausted" and "budget" in entry["limits_hit"]
    # the CLI's own accounting saw only its share; the gateway saw all of it, and held the line:
    # it stopped once the next request's worst case no longer fit, never past the budget
    spent = entry["gateway"]["spent_usd"]
    assert 0.5 - 0.2 < spent <= 0.5
    assert (entry["cli_cost_usd"] or 0) < spent
    log = [json.loads(line) for line in (result.case("c1") / "gateway.jsonl").read_text().splitlines()]
    assert any(item.get("refused") for item in log)
    assert all(item["cost_usd"] <= item["reserved_usd"] for item in log if item["outcome"] == "forwarded")
    assert elapsed < 150


def test_no_key_reaches_the_sandbox_and_nothing_but_the_gateway_is_reachable(project):
    """Online mode against an upstream on this host: the gateway holds the real key."""
    secret = "sk-ant-test-SECRET-" + "x7Q9" * 6
    with listening_on_host() as listener:
        connects = " ".join(
            f"python3 -c \"import socket; s=socket.socket(); s.settimeout(2); print('CONNECT {host}:{port}', s.connect_ex(('{host}', {port})))\";"
            for host, port in listener.targets
        )
        probe = (
            "env; for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null | tr '\\0' '\\n'; done;"
            # the needle is split so the command text itself does not contain it
            " grep -r -a -l -s x7Q''9 / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | sed 's/^/FOUND:/' | head;"
            " echo IFACES; cat /proc/net/dev; echo ROUTES; cat /proc/net/route; echo END;"
            f" {connects}"
            " python3 -c \"import socket\ntry:\n socket.getaddrinfo('deb.debian.org', 80); print('DNS ok')\nexcept OSError as e: print('DNS failed', e)\""
        )
        _skill_project(project)
        steps = [{"tool": "Bash", "input": {"command": probe}}, {"text": "probed"}]
        project.case("c1", {"task": "probe"}, script=steps)
        with ScriptedModelServer(parse_script(steps)) as upstream:
            result = project.run(env={"ANTHROPIC_BASE_URL": upstream.url, "ANTHROPIC_API_KEY": secret})
            served = upstream.requests
        connections = list(listener.connections)
    assert result.process.returncode == 0, result.process.stderr
    # the upstream saw the real key, injected by the gateway
    model_calls = [r for r in served if r.path.startswith("/v1/messages")]
    assert model_calls and all(r.headers.get("x-api-key") == secret for r in model_calls)
    # nothing the sandbox produced or the host logged for it contains the key
    for path in result.case("c1").rglob("*"):
        if path.is_file():
            assert "x7Q9" not in path.read_text(errors="replace"), path
    output = "\n".join(result.tool_results("c1"))
    assert "ANTHROPIC_API_KEY=sk-ant-agent-eval-sandbox-placeholder" in output
    assert "FOUND:" not in output
    interfaces = re.findall(r"^\s*(\w+):", output.split("IFACES", 1)[1].split("ROUTES", 1)[0], re.M)
    assert interfaces == ["lo"]
    routes = [line for line in output.split("ROUTES", 1)[1].split("END", 1)[0].splitlines() if line.strip()]
    assert len(routes) == 1 and routes[0].startswith("Iface")  # the header only: no route at all
    for host, port in listener.targets:
        match = re.search(rf"CONNECT {re.escape(host)}:{port} (\d+)", output)
        assert match and match.group(1) != "0", (host, output)
    assert "DNS failed" in output
    assert connections == []


def test_batch_mode_one_sandbox_for_all_cases(project):
    project.eval_yaml("""
        name: e2e-batch
        execution: {mode: batch, skill: scribe, arguments: "--input batch.yaml {prompt}", timeout: 120}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
        outputs: [{path: out, batch_pattern: "R-{n}"}]
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    project.case("a", {"prompt": "first"})
    project.case("b", {"prompt": "second"})
    command = ("cat batch.yaml case_order.yaml; mkdir -p out;"
               " echo A > out/R-1-alpha.md; echo B > out/R-2-beta.md; echo S > out/shared.txt")
    project.write("cases/model_script.yaml", f"- tool: Bash\n  input: {{command: {json.dumps(command)}}}\n- text: batch done\n")
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    run_dir = result.run_dir
    assert (run_dir / "stdout.log").exists() and (run_dir / "events.json").exists()
    assert (run_dir / "cases" / "a" / "out" / "R-1-alpha.md").read_text() == "A\n"
    assert (run_dir / "cases" / "b" / "out" / "R-2-beta.md").read_text() == "B\n"
    assert not (run_dir / "cases" / "a" / "out" / "R-2-beta.md").exists()
    events = json.loads((run_dir / "events.json").read_text())
    listing = "\n".join(e["content"] for e in events if e["type"] == "tool_result")
    assert "prompt: first" in listing and "prompt: second" in listing and "case_id: b" in listing
    run_result = json.loads((run_dir / "run_result.json").read_text())
    assert run_result["execution_mode"] == "batch" and set(run_result["per_case"]) == {"a", "b"}
    assert run_result["exit_code"] == 0


def test_repo_mode_copy_without_answer_key_and_changes_as_diff(project):
    project.eval_yaml("""
        name: e2e-repo
        execution: {prompt: "{q}", timeout: 120}
        models: {skill: claude-sonnet-4-6}
        runner: {workspace_mode: repo, permission_mode: bypassPermissions}
        dataset: {path: eval/cases}
        judges: [{name: j, prompt_file: eval/judge.md}]
    """)
    project.write("docs/guide.md", "Use the old API.\n")
    project.write("src/app.py", "VERSION = 'old'\n")
    project.write("eval/judge.md", "rubric: the answer is 42\n")
    case = project.root / "eval" / "cases" / "c1"
    case.mkdir(parents=True)
    (case / "input.yaml").write_text("q: update the version\n")
    (case / "answers.yaml").write_text("the answer is 42\n")
    command = ("ls -a; cat docs/guide.md; ls eval eval.yaml 2>&1; grep -r 'answer is 42' . 2>&1 | head -3;"
               " sed -i s/old/new/ src/app.py")
    (case / "model_script.yaml").write_text(f"- tool: Bash\n  input: {{command: {json.dumps(command)}}}\n- text: updated\n")
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    output = "\n".join(result.tool_results("c1"))
    assert "Use the old API." in output
    assert "cannot access 'eval.yaml'" in output
    assert output.rstrip().endswith("eval:")  # the directory is there, empty: judge.md and cases/ are not
    assert "answer is 42" not in output.replace("grep -r 'answer is 42'", "")
    diff = (result.case("c1") / "workspace.diff").read_text()
    assert "-VERSION = 'old'" in diff and "+VERSION = 'new'" in diff
    assert (result.case("c1") / "_modified" / "src" / "app.py").read_text() == "VERSION = 'new'\n"
    assert (project.root / "src" / "app.py").read_text() == "VERSION = 'old'\n"  # the real repo is untouched


def test_skills_and_plugins_are_staged_read_only(project):
    project.eval_yaml("""
        name: e2e-plugins
        execution: {skill: scribe, arguments: "{task}", timeout: 120}
        models: {skill: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions, plugin_dirs: [../shared-plugin]}
        dataset: {path: cases}
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    plugin = project.root.parent / "shared-plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "helpers", "version": "1.0.0"}')
    (plugin / "skills" / "tidy").mkdir(parents=True)
    (plugin / "skills" / "tidy" / "SKILL.md").write_text("---\nname: tidy\ndescription: tidies\n---\nTidy up.\n")
    command = ("echo x > .claude/skills/scribe/SKILL.md; echo rc=$?; touch .staged-plugins/shared-plugin/new; echo rc=$?;"
               " cat .claude/skills/scribe/SKILL.md | head -2; ls .staged-plugins/shared-plugin/skills")
    project.case("c1", {"task": "try"}, script=[{"tool": "Bash", "input": {"command": command}}, {"text": "x"}])
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    output = "\n".join(result.tool_results("c1"))
    assert output.count("Read-only file system") == 2 and "rc=0" not in output
    assert "name: scribe" in output and "tidy" in output
    init = next(json.loads(line) for line in (result.case("c1") / "stdout.log").read_text().splitlines()
                if '"subtype":"init"' in line.replace(" ", ""))
    assert "scribe" in init["slash_commands"] and "helpers:tidy" in init["slash_commands"]
