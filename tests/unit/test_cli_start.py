"""What every command pays before it does anything: the imports of the CLI."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_starts_without_the_anthropic_sdk() -> None:
    """The SDK's import costs ~1.2 s of CPU; only a model call from the host needs it (model_api.py)."""
    code = ("import sys, agent_eval_sandbox.cli, agent_eval_sandbox.app.run, agent_eval_sandbox.app.score; "
            "print(sorted(m for m in sys.modules if m == 'anthropic' or m.startswith('anthropic.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
