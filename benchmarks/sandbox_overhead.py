"""Per-case overhead of the Docker sandbox, against the floor of a bare `docker run`.

    python benchmarks/sandbox_overhead.py [--iterations 20] [--image REF]

Each iteration times one case's life cycle without an agent, create (and start)
-> copy in a small workspace -> exec `true` -> copy out -> destroy, and, in the
same loop so both see the same machine load, a bare
`docker run --rm --network none IMAGE true` through the docker CLI. Prints the
medians, the phases, and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from agent_eval_sandbox.sandbox.base import SandboxSpec
from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
from agent_eval_sandbox.sandbox.image import ensure_sandbox_image
from agent_eval_sandbox.sandbox.teardown import run_scope

PHASES = ("create", "copy_in", "exec", "copy_out", "destroy")


def small_workspace(root: Path) -> Path:
    for i in range(10):
        sub = root / f"pkg{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"module{i}.py").write_text(f"VALUE = {i}\n" * 50)
    (root / "README.md").write_text("# a case workspace\n")
    return root


def one_case(backend: DockerBackend, image: str, run_id: str, workspace: Path, out: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    mark = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        times[name] = now - mark
        mark = now

    sandbox = backend.create(SandboxSpec(image, run_id, "bench", deadline_epoch=time.time() + 600))
    lap("create")
    sandbox.copy_in(workspace, "/workspace")
    lap("copy_in")
    result = sandbox.exec(["true"])
    assert result.ok, result
    lap("exec")
    sandbox.copy_out("/workspace", out, max_bytes=10**8, max_files=10_000)
    lap("copy_out")
    sandbox.destroy()
    lap("destroy")
    return times


def bare_run(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--image", help="sandbox image (default: build or reuse the default one)")
    args = parser.parse_args()

    backend = DockerBackend()
    image = args.image or ensure_sandbox_image(client=backend.client).ref
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    totals: list[float] = []
    bare: list[float] = []
    with run_scope(backend, run_id), tempfile.TemporaryDirectory() as tmp:
        workspace = small_workspace(Path(tmp) / "workspace")
        bare_run(image)  # warm-up: page cache, image layers
        one_case(backend, image, run_id, workspace, Path(tmp) / "warm")
        for i in range(args.iterations):
            times = one_case(backend, image, run_id, workspace, Path(tmp) / f"out{i}")
            for name in PHASES:
                phases[name].append(times[name])
            totals.append(sum(times.values()))
            bare.append(bare_run(image))

    median_total, median_bare = statistics.median(totals), statistics.median(bare)
    print(f"image: {image}   iterations: {args.iterations}")
    print(f"sandbox case overhead (median): {median_total * 1000:7.1f} ms")
    for name in PHASES:
        print(f"  {name:<9} {statistics.median(phases[name]) * 1000:7.1f} ms")
    print(f"bare docker run --rm --network none IMAGE true (median): {median_bare * 1000:7.1f} ms")
    print(f"ratio: {median_total / median_bare:.2f}x")


if __name__ == "__main__":
    main()
