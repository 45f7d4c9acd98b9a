"""`serve()`, the function behind `agent-eval-sandbox model-server SCRIPT`."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import httpx
import pytest

from agent_eval_sandbox.errors import ConfigError, UserError
from agent_eval_sandbox.gateway import serve

SERVE = "import sys; from agent_eval_sandbox.gateway import serve; serve(sys.argv[1], port=0)"


def test_serve_announces_its_url_and_answers(write_script):
    script = write_script([{"text": "served"}])
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(script)], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = re.search(r"at (http://\S+)", line).group(1)
        assert "1 step(s)" in line and str(script) in line
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.head("/").status_code == 200
            body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
            assert client.post("/v1/messages", json=body).json()["content"][0]["text"] == "served"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()


def test_a_bad_script_fails_before_anything_listens(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("- tool: Bash\n  tool_calls: [{tool: Read}]\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: steps\[0\]"):
        serve(path, port=0)


def test_a_busy_port_is_a_user_error(write_script):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve(write_script([{"text": "x"}]), port=port)
