"""Tool interception through the whole runner: handlers compiled on the host, the
real CLI's PreToolUse hook in the sandbox, the host broker deciding and logging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: does the task\n---\nDo what the arguments say.\n"
FAKE_MCP = Path(__file__).parents[1] / "interception" / "fake_mcp_server.py"


def question(text: str, *labels: str) -> dict:
    return {"tool": "AskUserQuestion", "input": {"questions": [{
        "question": text, "header": text[:12], "multiSelect": False,
        "options": [{"label": label, "description": f"pick {label}"} for label in labels],
    }]}}


def _project(project, *extra: str) -> None:
    extra_lines = "\n        ".join(extra)
    project.eval_yaml(f"""
        name: e2e-interception
        execution: {{skill: scribe, arguments: "{{task}}", timeout: 120}}
        models: {{skill: claude-sonnet-4-6, hook: claude-haiku-4-5}}
        runner:
          permission_mode: bypassPermissions
          settings: {{enableAllProjectMcpServers: true}}
        dataset: {{path: cases, workspace: {{files: [.mcp.json, fake_mcp_server.py]}}}}
        inputs:
          tools:
            - match: Questions asked to the user via AskUserQuestion.
              prompt: Answer from the case context.
            - match: Any Jira interaction by Bash scripts calling the Jira API.
              prompt: Only allow when JIRA_SERVER is a test instance.
            - match: The Jira MCP tools (mcp__jira__*).
              prompt: Block them all.
            - match: Anything touching deploy scripts.
              prompt: Block deploys.
        hooks:
          before_each:
            - command: |
                case "$CASE_ID" in *prod*) server=https://jira.example.com ;; *) server=http://jira-test.localhost ;; esac
                printf 'env: {{JIRA_SERVER: "%s"}}\\n' "$server" > .hook-outputs.yaml
        {extra_lines}
    """)
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    # The reviewed, pre-resolved handlers (what `compile-handlers --llm` would write).
    project.write("tool_handlers.yaml", yaml.safe_dump({
        "handlers": [
            {"match": "Questions asked to the user via AskUserQuestion.", "patterns": ["AskUserQuestion"],
             "prompt": "Answer from the case context."},
            {"match": "Any Jira interaction by Bash scripts", "patterns": ["Bash"],
             "input_filters": ["\\\\bjira\\\\b", "JIRA_SERVER"],
             "env_checks": {"JIRA_SERVER": {"must_contain": ["test", "localhost"]}},
             "prompt": "Only allow when JIRA_SERVER is a test instance."},
            {"match": "The Jira MCP tools", "patterns": ["mcp__jira__*"], "prompt": "Block them all."},
            {"match": "Anything touching deploy scripts.", "patterns": ["Bash"], "prompt": "Block deploys."},
        ],
        "hook_model": "claude-haiku-4-5",
        "case_overrides": {"Which color?": "Blue"},
    }))


def _case(project, case_id: str, steps: list[dict], **files: str) -> None:
    mcp = {"mcpServers": {"jira": {"command": "python3", "args": ["fake_mcp_server.py", "mcp-calls.jsonl"]}}}
    project.case(case_id, {"task": "go"}, script=steps, files={
        ".mcp.json": json.dumps(mcp), "fake_mcp_server.py": FAKE_MCP.read_text(), **files})


def decisions(result, case_id: str) -> list[dict]:
    path = result.case(case_id) / "tool_decisions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_questions_are_answered_by_override_model_and_fallback(project):
    _project(project)
    _case(project, "q-override", [question("Which color?", "Red", "Blue"), {"text": "ok"}])
    _case(project, "q-model", [question("Which size?", "Small", "Large"), {"text": "ok"}],
          **{"answers.yaml": "size: always pick the large one\n", "hook_script.yaml": "- text: large\n"})
    _case(project, "q-fallback", [question("Which fruit?", "Apple", "Pear"), {"text": "ok"}])
    result = project.run("--offline", "--parallelism", "3")
    assert result.process.returncode == 0, result.process.stderr
    answers = {case: "\n".join(result.tool_results(case)) for case in ("q-override", "q-model", "q-fallback")}
    assert '"Which color?"="Blue"' in answers["q-override"]
    assert '"Which size?"="Large"' in answers["q-model"]  # the hook model's "large", resolved to the label
    assert '"Which fruit?"="Apple"' in answers["q-fallback"]  # no hook model offline: the first option
    tiers = {case: decisions(result, case)[0] for case in answers}
    assert all(d["tool_name"] == "AskUserQuestion" and d["decision"] == "allow" for d in tiers.values())
    assert "answers.yaml" not in json.dumps(result.events("q-model"))


def test_jira_bash_gated_by_the_case_env_and_mcp_denied_by_glob(project):
    _project(project)
    jira = {"tool": "Bash", "input": {"command": "echo jira issue create --server $JIRA_SERVER"}}
    mcp = {"tool": "mcp__jira__create_issue", "input": {"summary": "Login bug"}}
    plain = {"tool": "Bash", "input": {"command": "echo plain-ls-allowed; cat mcp-calls.jsonl 2>&1 || true"}}
    deploy = {"tool": "Bash", "input": {"command": "echo ./deploy.sh"}}
    _case(project, "jira-test", [jira, plain, deploy, {"text": "done"}])
    _case(project, "jira-prod", [jira, mcp, plain, {"text": "done"}])
    result = project.run("--offline", "--parallelism", "2")
    assert result.process.returncode == 0, result.process.stderr
    test_out = result.tool_results("jira-test")
    prod_out = result.tool_results("jira-prod")
    assert "jira issue create --server http://jira-test.localhost" in test_out[0]
    assert "jira issue create" not in prod_out[0] and "JIRA_SERVER" in prod_out[0]  # the deny reason
    assert "The Jira MCP tools" in prod_out[1]  # the MCP call, denied by the mcp__jira__* glob
    assert "plain-ls-allowed" in prod_out[2] and "Login bug" not in prod_out[2]  # the MCP server never got it
    # a Bash handler without input_filters is skipped (pass-through) with a warning on the controller
    assert "./deploy.sh" in test_out[2]
    assert "Anything touching deploy scripts" in result.process.stderr and "input_filters" in result.process.stderr
    log = decisions(result, "jira-prod")
    assert [(d["tool_name"], d["decision"]) for d in log if d["decision"] != "pass"] == [
        ("Bash", "deny"), ("mcp__jira__create_issue", "deny")]


def test_a_tampered_or_killed_hook_client_still_denies(project):
    _project(project)
    tamper = (
        "echo 'print(1)' > /opt/agent-eval/hook_client.py; echo overwrite=$?;"
        " chmod 777 /opt/agent-eval/hook_client.py; echo chmod=$?;"
        " rm -f /opt/agent-eval/hook_client.py; echo rm=$?;"
        " echo '{\"disableAllHooks\": true, \"hooks\": {}}' > .claude/settings.json; echo settings=$?;"
        " echo '{}' > /etc/claude-code/managed-settings.json; echo managed=$?;"
        # A killer that SIGKILLs every hook client process the moment it appears.
        " printf 'import os,time\\nme=os.getpid()\\nwhile True:\\n  for p in os.listdir(\\\"/proc\\\"):\\n"
        "    try:\\n      c=open(\\\"/proc/\\\"+p+\\\"/cmdline\\\",\\\"rb\\\").read()\\n"
        "      if int(p)!=me and b\\\"/opt/agent-eval/hook_client.py\\\" in c.split(bytes(1)): os.kill(int(p),9)\\n"
        "    except Exception: pass\\n  time.sleep(0.001)\\n' > /tmp/k.py;"
        " setsid nohup python3 /tmp/k.py >/dev/null 2>&1 & echo killer-started"
    )
    jira = {"tool": "Bash", "input": {"command": "echo jira issue create --server $JIRA_SERVER"}}
    _case(project, "tamper-prod", [{"tool": "Bash", "input": {"command": tamper}}, jira, {"text": "done"}])
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    out = result.tool_results("tamper-prod")
    for attempt in ("overwrite", "chmod", "rm", "managed"):
        assert f"{attempt}=1" in out[0], out[0]  # the read-only mounts refused every edit
    assert "settings=0" in out[0] and "killer-started" in out[0]  # these attempts did happen
    results = [e for e in result.events("tamper-prod") if e["type"] == "tool_result"]
    assert results[1]["is_error"], results[1]  # the denied call was blocked, whatever killed the client
    assert "jira issue create --server https://jira.example.com" not in out[1]


def test_the_agent_finds_no_answer_key(project):
    _project(project, "sandbox: {filesystem: {denyRead: [private/]}}",
             "permissions: {deny: [{path: notes/secret.md, tools: [Read]}]}")
    # The CLI's own permission check refuses a Bash command naming a Read-denied file outright,
    # so the probes that name them are separate calls; the OS rule is what the others meet.
    search = (
        "cat answers.yaml tool_handlers.yaml ../tool_handlers.yaml /workspace/../eval.yaml 2>&1 | head -5;"
        " python3 -c \"import os; names={'answers.yaml','tool_handlers.yaml','key.txt','secret.md'};"
        " print('WALK', sorted(os.path.join(d, f) for r in ('/workspace','/home','/tmp','/run','/opt','/etc')"
        " for d, _, fs in os.walk(r) for f in fs if f in names))\";"
        " find / -xdev \\( -name 'answers.yaml' -o -name 'tool_handlers.yaml' -o -name 'key.txt' -o -name 'hook_script.yaml'"
        " -o -name 'model_script.yaml' -o -name 'eval.yaml' \\) 2>/dev/null | sed 's/^/FOUND:/';"
        " grep -r -l -s zq7K''x9Wm /workspace /home /tmp /run /opt /etc /root /srv /mnt /var | sed 's/^/FOUND:/';"
        " ln -s /proc/1/root/workspace rootlink 2>&1; ls rootlink/ 2>&1 | head -3; ls -a; ls -a notes private 2>&1"
    )
    direct = "awk 'FNR==1' private/key.txt notes/secret.md 2>&1; python3 -c \"print(open('notes/secret.md').read())\" 2>&1"
    steps = [{"tool": "Bash", "input": {"command": search}}, {"tool": "Bash", "input": {"command": direct}},
             {"tool": "Read", "input": {"file_path": "/workspace/notes/secret.md"}}, {"text": "done"}]
    _case(project, "snoop", steps,
          **{"answers.yaml": "the secret answer is zq7Kx9Wm\n", "private/key.txt": "key-zq7Kx9Wm\n",
             "notes/secret.md": "secret-zq7Kx9Wm\n", "notes/public.md": "public\n"})
    project.eval_yaml((project.root / "eval.yaml").read_text().replace(
        "files: [.mcp.json, fake_mcp_server.py]", "files: [.mcp.json, fake_mcp_server.py, private/, notes/]"))
    result = project.run("--offline")
    assert result.process.returncode == 0, result.process.stderr
    search_out, direct_out, read_out = result.tool_results("snoop")
    for output in (search_out, direct_out, read_out):
        assert "zq7Kx9Wm" not in output
    assert "FOUND:" not in search_out
    assert "WALK []" in search_out
    # the allowed file is there; the denied ones are not in the container at all
    assert "public.md" in search_out and "secret.md" not in search_out.split("WALK")[1]
    assert "No such file" in direct_out or "denied" in direct_out.lower()
