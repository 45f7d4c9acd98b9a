"""A stand-in for the runner, for the teardown tests: sandboxes busy with `sleep 9999`.

Usage: python controller.py RUN_ID IMAGE COUNT
Prints "ready" once every sandbox runs its command, then waits to be signalled.
"""

from __future__ import annotations

import sys
import threading
import time

from agent_eval_sandbox.sandbox.base import SandboxError, SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.teardown import run_scope


def main() -> int:
    run_id, image, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    backend = DockerBackend()
    sandboxes = []
    try:
        with run_scope(backend, run_id):
            for i in range(count):
                sandboxes.append(
                    backend.create(SandboxSpec(image, run_id, f"case-{i}", deadline_epoch=time.time() + 3600)))

            def busy(sandbox) -> None:
                try:
                    sandbox.exec(["sleep", "9999"])
                except SandboxError:
                    pass  # removed under it by the teardown

            for sandbox in sandboxes:
                threading.Thread(target=busy, args=(sandbox,), daemon=True).start()
            time.sleep(0.5)
            print("ready", flush=True)
            threading.Event().wait()
    except KeyboardInterrupt:
        return 130
    finally:
        for sandbox in sandboxes:  # as the runner does: after the teardown, each sandbox lets go of its lifeline
            sandbox.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
