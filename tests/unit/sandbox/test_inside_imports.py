"""What the in-sandbox scripts import: each start of them is paid from its case's CPU.

The launcher starts once a case, the hook client at every tool call; both in the sandbox, within
its CPU limit, and beside the next cases on a busy host. `typing`, `dataclasses` (and the `inspect`
it brings) cost them ~9 ms a start for nothing they use at run time, so they stay out.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agent_eval_sandbox.inside import paths
from agent_eval_sandbox.runner.agent_command import LAUNCHER_INTERPRETER
from agent_eval_sandbox.sandbox.image import INSIDE_DIR

UNWANTED = {"typing", "dataclasses", "inspect", "ast"}


def _imported_by(module: str) -> set[str]:
    code = (f"import sys, json; before = set(sys.modules); sys.path.insert(0, {str(INSIDE_DIR)!r}); "
            f"import {module}; print(json.dumps(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("module", ["run_agent", "hook_client"])
def test_the_in_sandbox_scripts_import_nothing_they_do_not_use(module: str) -> None:
    assert _imported_by(module) & UNWANTED == set()


def test_only_the_launcher_that_runs_its_own_cli_options_needs_argparse() -> None:
    assert "argparse" not in _imported_by("hook_client")


def test_the_in_sandbox_interpreters_skip_site() -> None:
    """`-S`: the scripts need the standard library alone; `-I`: nothing of the agent's environment."""
    from agent_eval_sandbox.interception.settings import HOOK_COMMAND

    assert LAUNCHER_INTERPRETER[1:] == ("-I", "-S")
    assert HOOK_COMMAND.split()[:3] == [paths.PROTECTED_PYTHON, "-I", "-S"]


def test_container_hooks_are_confined_by_the_execute_only_interpreter() -> None:
    """Non-dumpable from its first instruction: nothing the agent left running can attach to it before
    its filter is on (tests/integration/attacks/test_attack_seccomp_stack.py)."""
    from agent_eval_sandbox.lifecycle.container import CONFINED, hook_argv

    assert CONFINED == (paths.PROTECTED_PYTHON, "-I", "-S", paths.CONFINE)
    assert hook_argv("true") == [*CONFINED, "bash", "-c", "true"]
