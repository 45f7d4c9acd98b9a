"""A stand-in for `claude -p` in a fake sandbox (`agent_eval_sandbox/sandbox/fake.py`).

It does what the pipeline depends on the real CLI for, in-process: it reads
the prompt the host mounted, asks the model through the case's gateway
socket (so the gateway keeps its record and charges the budget, as for the
real CLI), runs the tools the model calls as functions of the sandbox, prints
stream-json, and leaves its session transcript under $HOME/.claude/projects.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.sandbox.fake import Behaviour, ExecCall, Hang, Reply, exit_ok, stream_json

# A tool: (the sandbox the agent runs in, the model's input) -> what the tool printed.
Tool = Callable[[ExecCall, Mapping[str, Any]], str]
MAX_TURNS = 20


def write_tool(call: ExecCall, tool_input: Mapping[str, Any]) -> str:
    call.write(str(tool_input["file_path"]), str(tool_input["content"]))
    return f"File created successfully at: {tool_input['file_path']}"


def is_agent(call: ExecCall) -> bool:
    """The launcher's command line: `... run_agent.py ... -- claude ...`."""
    return "--" in call.cmd and call.cmd[call.cmd.index("--") + 1:][:1] == ("claude",)


def agent_argument(call: ExecCall, flag: str) -> str:
    value = call.arg_after(flag)
    assert value is not None, f"the agent's command has no {flag}: {call.cmd}"
    return value


@dataclass
class FakeCli:
    """The behaviour of a fake sandbox whose agent command is this CLI; other commands go to `others`.

    `forged` lines are printed after the session's own, as a skill that got hold of
    the CLI's stdout would. `before` runs first (write files, look at the env);
    `hang` leaves the command running after the session, until its deadline.
    """

    tools: dict[str, Tool] = field(default_factory=lambda: {"Write": write_tool})
    forged: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = 0
    hang: bool = False
    before: Callable[[ExecCall], None] | None = None
    others: Behaviour = exit_ok
    calls: list[ExecCall] = field(default_factory=list)  # the agent's execs
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, call: ExecCall) -> Reply | Hang:
        if not is_agent(call):
            return self.others(call)
        with self._lock:
            self.calls.append(call)
        if self.before is not None:
            self.before(call)
        lines = self.session(call) + self.forged
        if self.hang:
            return Hang(stdout=stream_json(lines))
        return Reply(stdout=stream_json(lines), exit_code=self.exit_code)

    def session(self, call: ExecCall) -> list[dict[str, Any]]:
        """The stream-json lines of one session, its transcript written where the CLI writes it."""
        model = agent_argument(call, "--model")
        prompt_file = agent_argument(call, "--prompt-file")
        # A pipeline's steps are sent their prompts on stdin (runner/agent_command.PROMPT_ON_STDIN).
        prompt = (call.stdin or b"").decode() if prompt_file == "/dev/stdin" else call.host_path(prompt_file).read_text()
        session = str(uuid.uuid4())
        lines: list[dict[str, Any]] = [{"type": "system", "subtype": "init", "session_id": session, "model": model,
                                        "cwd": call.cwd, "tools": sorted(self.tools)}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        usage = {"input_tokens": 0, "output_tokens": 0}
        final, error, turns = "", None, 0
        transport = httpx.HTTPTransport(uds=str(call.host_path(agent_argument(call, "--gateway-socket"))))
        with httpx.Client(transport=transport, base_url="http://gateway", timeout=30) as client:
            while turns < MAX_TURNS:
                reply = client.post("/v1/messages", json={"model": model, "max_tokens": 4096, "messages": messages},
                                    headers={"x-claude-code-session-id": session, "anthropic-version": "2023-06-01"})
                if reply.status_code != 200:
                    error = f"API Error: {reply.status_code} {reply.text}"
                    break
                message = reply.json()
                turns += 1
                for key in usage:
                    usage[key] += int(message.get("usage", {}).get(key, 0))
                lines.append({"type": "assistant", "message": message, "session_id": session,
                              "parent_tool_use_id": None})
                messages.append({"role": "assistant", "content": message["content"]})
                calls = [b for b in message["content"] if b.get("type") == "tool_use"]
                if not calls:
                    final = "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
                    break
                results = [self._run_tool(call, block) for block in calls]
                lines.append({"type": "user", "message": {"role": "user", "content": results}, "session_id": session,
                              "parent_tool_use_id": None})
                messages.append({"role": "user", "content": results})
        lines.append({"type": "result", "subtype": "error_during_execution" if error else "success",
                      "is_error": error is not None, "num_turns": turns, "result": error or final,
                      "session_id": session, "total_cost_usd": 0.0, "usage": usage, "permission_denials": []})
        transcript = f"{paths.HOME}/.claude/projects/-workspace/{session}.jsonl"
        call.write(transcript, stream_json({**line, "sessionId": session} for line in lines))
        return lines

    def _run_tool(self, call: ExecCall, block: Mapping[str, Any]) -> dict[str, Any]:
        tool = self.tools.get(str(block.get("name")))
        if tool is None:
            return {"type": "tool_result", "tool_use_id": block["id"], "is_error": True,
                    "content": f"<tool_use_error>No such tool available: {block.get('name')}</tool_use_error>"}
        return {"type": "tool_result", "tool_use_id": block["id"], "content": tool(call, block.get("input") or {})}
