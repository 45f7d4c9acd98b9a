"""Benchmark: the quickstart eval end to end, against the bare `docker run` floor.

Runs `agent-eval-sandbox run examples/quickstart/eval.yaml --offline` N times at
parallelism 1 and 2 and prints, measured in the same run:

- the floor: median of `docker run --rm --network none IMAGE true`;
- per case: median wall time (stage → sandbox → agent → collect → teardown),
  the median time inside the agent's exec (the real CLI talking to the
  scripted model), and the controller's overhead (the difference);
- per run: median wall clock, and the speed-up of parallelism 2 over 1.

Usage: .venv/bin/python benchmarks/e2e_quickstart.py [--runs 5] [--floor-runs 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart" / "eval.yaml"


def sandbox_image() -> str:
    from agent_eval_sandbox.sandbox.image import ensure_sandbox_image

    return ensure_sandbox_image().ref


def floor(image: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def quickstart(parallelism: int, runs_dir: Path) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval_sandbox", "run", str(QUICKSTART), "--offline", "--json",
         "--parallelism", str(parallelism), "--runs-dir", str(runs_dir)],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - started
    if process.returncode not in (0, 1):
        raise SystemExit(f"quickstart run failed ({process.returncode}):\n{process.stderr}")
    per_case = json.loads(process.stdout)["run_result"]["per_case"].values()
    return wall, list(per_case)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="quickstart runs per parallelism level")
    parser.add_argument("--floor-runs", type=int, default=20)
    args = parser.parse_args()
    image = sandbox_image()
    floor_times = floor(image, args.floor_runs)
    floor_median = statistics.median(floor_times)
    print(f"image: {image}")
    print(f"floor  docker run --rm --network none IMAGE true: median {floor_median:.3f}s over {args.floor_runs}")
    walls: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        quickstart(1, Path(tmp))  # warm-up: image and binary caches
        for parallelism in (1, 2):
            run_walls, case_walls, agent, overhead = [], [], [], []
            for _ in range(args.runs):
                wall, cases = quickstart(parallelism, Path(tmp))
                run_walls.append(wall)
                for case in cases:
                    case_walls.append(case["duration_s"])
                    agent.append(case["agent_duration_s"])
                    overhead.append(case["duration_s"] - case["agent_duration_s"])
            walls[parallelism] = statistics.median(run_walls)
            print(
                f"parallelism {parallelism}: run wall clock median {walls[parallelism]:.2f}s "
                f"({len(case_walls)} cases over {args.runs} runs)\n"
                f"  per case: wall {statistics.median(case_walls):.3f}s "
                f"({statistics.median(case_walls) / floor_median:.1f}x floor), "
                f"agent exec {statistics.median(agent):.3f}s, "
                f"controller overhead {statistics.median(overhead):.3f}s "
                f"({statistics.median(overhead) / floor_median:.1f}x floor)"
            )
    print(f"speed-up of parallelism 2 over 1 (run wall clock): {walls[1] / walls[2]:.2f}x")


if __name__ == "__main__":
    main()
