"""Which container runtimes the sandbox treats as running on the host's kernel."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.sandbox.image import exec_only_binaries
from agent_eval_sandbox.sandbox.runtimes import on_host_kernel


@pytest.mark.parametrize("runtime", [None, "runc", "io.containerd.runc.v2", "crun"])
def test_runc_and_crun_run_on_the_host_kernel_with_execute_only_binaries(runtime: str | None):
    assert on_host_kernel(runtime)
    assert exec_only_binaries(runtime)


@pytest.mark.parametrize("runtime", ["runsc", "runsc-nonet", "kata-runtime", "my-runc-fork"])
def test_any_other_runtime_gets_the_paths_that_assume_nothing_of_the_kernel(runtime: str):
    # A runtime this tool does not know is taken as gVisor is: readable binaries, Docker's copy-out,
    # counters read inside, a paused container resumed before its removal.
    assert not on_host_kernel(runtime)
    assert not exec_only_binaries(runtime)
