"""Container runtimes, by what the sandbox's boundary may assume of them.

runc and crun run the sandbox's processes on the host's own kernel: it
enforces the non-dumpable flag on `/proc` (a launcher's descriptors stay its
own), runs execute-only binaries, counts the processes in the container's
cgroup on the host, and kills a paused container's processes when it is
removed. gVisor (runsc) has a kernel of its own and does none of that the same
way, so a sandbox under it takes the slower paths that assume none of it.
"""

from __future__ import annotations

# Docker's names for runc (its default), and crun's usual registered name.
HOST_KERNEL_RUNTIMES = frozenset({"runc", "io.containerd.runc.v2", "crun"})


def on_host_kernel(runtime: str | None) -> bool:
    """Whether a sandbox under `runtime` (None: taken as Docker's default, runc) runs on the host's kernel."""
    return runtime is None or runtime in HOST_KERNEL_RUNTIMES
