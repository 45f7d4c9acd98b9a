"""A stdio MCP server with one tool, `create_issue`, that records its calls.

Claude Code refuses tool names no server offers before any hook runs, so an
MCP call the hook can gate needs a server; this one speaks just enough
JSON-RPC (initialize, tools/list, tools/call). Usage: fake_mcp_server.py CALLS_FILE
"""

from __future__ import annotations

import json
import sys


def main(calls_file: str) -> None:
    def send(message: dict) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        request_id, method = message.get("id"), message.get("method")
        if method == "initialize":
            version = message.get("params", {}).get("protocolVersion", "2024-11-05")
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "fake-jira", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [{
                "name": "create_issue", "description": "Create a Jira issue",
                "inputSchema": {"type": "object", "properties": {"summary": {"type": "string"}}}}]}})
        elif method == "tools/call":
            with open(calls_file, "a") as handle:
                handle.write(json.dumps(message.get("params")) + "\n")
            send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "created FAKE-1"}]}})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main(sys.argv[1])
