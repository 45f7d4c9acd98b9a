"""What a sandbox's life costs the machine, layer by layer, against a bare container's in the same run.

    .venv/bin/python benchmarks/perf.py lifecycle [--runs 8] [--each 5] [--runtime crun]

On a busy machine the parallel speed-up is bound by the CPU a case costs, and
one container a case is part of that cost whatever the tool does. This splits
it: each layer below is one more thing a case's sandbox does, and each is
timed by the machine's busy time (`/proc/stat`, every core: the daemons, the
shims, the runtime, the kernel and this process alike) over `--each` lives in
a row, after a pause and with a pause after it (the daemon finishes a removal
after its call returns). The layers are interleaved in every round, and the
same pauses with nothing between them are read in each round too: the machine's
own background, taken off every layer.

The layers, in the order a case pays for them:

- `docker run` (the CLI): the e2e floor, `docker run --rm --network none IMAGE
  true`, the docker CLI's own start included;
- a bare container: the same through the API (create, start, wait, remove), with
  the run's labels (its teardown finds what an interruption left);
- the sandbox's container: `true` with the sandbox's container configuration
  (hardening, limits, its tmpfs volumes and read-only paths, labels, no Docker
  network);
- + its lifeline: a sandbox made and removed by the backend, its main process
  the lifeline (`head` on a stdin the backend holds);
- + the launcher on standby: the same with the launcher started on standby,
  as a case's sandbox is made (the Docker side of a sandboxed case);
- one exec instead: the lifeline's sandbox with one `docker exec` of `true`,
  what each later command of a case (a pipeline's step, a hook) adds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.cpu_accounts import machine_busy_s

if TYPE_CHECKING:
    from agent_eval_sandbox.sandbox.docker_backend import DockerBackend

NOTHING = "nothing (the pauses alone)"
BARE = "a bare container"
LAYERS = ("`docker run` (the CLI)", BARE, "the sandbox's container", "+ its lifeline", "+ the launcher on standby",
          "one exec instead")
# Before each layer's lives, so that what came before has settled; after them, for the daemon's
# work that follows a removal's answer.
SETTLE_S = 0.3


@dataclass(frozen=True)
class LayerCost:
    name: str
    cost_s: float  # the machine's CPU a life of this layer, the background taken off (median of the rounds)
    rounds: tuple[float, ...]

    def over(self, floor: LayerCost) -> float:
        return self.cost_s / floor.cost_s


def layer_costs(rounds: Sequence[Mapping[str, float]], each: int) -> list[LayerCost]:
    """Each layer's CPU a life: in every round what its `each` lives cost the machine less what the pauses
    alone cost it in that round, over `each`; then the median of the rounds. `rounds` maps each layer, and
    NOTHING, to the machine's busy seconds over that stretch of the round."""
    costs = []
    for name in (name for name in rounds[0] if name != NOTHING):
        per_round = tuple((r[name] - r[NOTHING]) / each for r in rounds)
        costs.append(LayerCost(name, statistics.median(per_round), per_round))
    return costs


def machine_cpu_of(work: Callable[[], None], each: int) -> float:
    """The machine's busy seconds over `each` runs of `work` between two pauses."""
    time.sleep(SETTLE_S)
    before = machine_busy_s()
    for _ in range(each):
        work()
    time.sleep(SETTLE_S)
    return machine_busy_s() - before


def bare_docker_run(image: str, runtime: str | None = None) -> float:
    """The wall time of one `docker run --rm --network none IMAGE true` (e2e's floor)."""
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", *(["--runtime", runtime] if runtime else []),
                    image, "true"], check=True, capture_output=True)
    return time.perf_counter() - started


def layer_works(backend: DockerBackend, image: str, run_id: str,
                runtime: str | None) -> dict[str, Callable[[], None]]:
    """One life of each layer, through the tool's own backend (its container configuration, its sandboxes)."""
    from agent_eval_sandbox.runner.agent_command import launcher_command
    from agent_eval_sandbox.sandbox import labels as L
    from agent_eval_sandbox.sandbox import lifeline
    from agent_eval_sandbox.sandbox.base import Hardening, SandboxSpec
    from agent_eval_sandbox.sandbox.docker_backend import host_config, no_network
    from agent_eval_sandbox.sandbox.docker_sandbox import remove_container

    api = backend.client.api

    def spec(standby: bool = False) -> SandboxSpec:
        return SandboxSpec(image, run_id, f"c{uuid.uuid4().hex[:8]}", deadline_epoch=time.time() + 600,
                           hardening=Hardening(runtime=runtime), standby=launcher_command() if standby else ())

    on_host_kernel = backend.runs_on_host_kernel(spec())

    def labels() -> dict[str, str]:  # the run's, so that its teardown finds whatever an interruption left
        return L.object_labels(run_id=run_id, case_id=f"c{uuid.uuid4().hex[:8]}", owner=L.current_owner(),
                               deadline_epoch=time.time() + 600)

    def docker_cli() -> None:
        bare_docker_run(image, runtime)

    def to_its_end(container: str) -> None:
        api.start(container)
        api.wait(container)
        remove_container(api, container, on_host_kernel=on_host_kernel)

    def bare() -> None:
        config = api.create_host_config(network_mode="none", runtime=runtime)
        to_its_end(api.create_container(image, command=["true"], network_disabled=True, labels=labels(),
                                        host_config=config)["Id"])

    def sandbox_container() -> None:
        one, its_labels = spec(), labels()
        to_its_end(api.create_container(image, command=["true"], user=lifeline.MAIN_USER, labels=its_labels,
                                        environment={"HOME": one.home}, working_dir=one.workspace,
                                        network_disabled=no_network(one),
                                        host_config=host_config(api, one, its_labels))["Id"])

    def sandbox(standby: bool, command: Sequence[str] | None = None) -> Callable[[], None]:
        def life() -> None:
            made = backend.create(spec(standby))
            try:
                if command is not None:
                    result = made.exec(list(command))
                    assert result.exit_code == 0, result
            finally:
                made.destroy()
        return life

    works = dict(zip(LAYERS, (docker_cli, bare, sandbox_container, sandbox(False), sandbox(True),
                              sandbox(False, ["true"])), strict=True))
    return {NOTHING: lambda: None, **works}


def lifecycle(args: argparse.Namespace, image: str, load_line: Callable[[], str]) -> dict[str, Any]:
    from agent_eval_sandbox.sandbox.docker_backend import DockerBackend
    from agent_eval_sandbox.sandbox.teardown import run_scope

    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    print(f"image {image}; {load_line()}", flush=True)
    rounds: list[dict[str, float]] = []
    backend = DockerBackend()
    with run_scope(backend, run_id):
        works = layer_works(backend, image, run_id, args.runtime)
        for work in works.values():  # warm-up: page cache, the image's layers, the daemon's caches
            work()
        for index in range(args.runs):
            # NOTHING's stretch holds no lives: it is read as `each` empty calls between the same pauses.
            rounds.append({name: machine_cpu_of(work, args.each) for name, work in works.items()})
            bare = (rounds[-1][BARE] - rounds[-1][NOTHING]) / args.each
            print(f"round {index + 1}/{args.runs}: a bare container {bare * 1000:.0f} ms of the machine's CPU; "
                  f"{load_line()}", flush=True)
    costs = layer_costs(rounds, args.each)
    floor = next(c for c in costs if c.name == BARE)
    print(f"\nmedians of {args.runs} rounds of {args.each} lives each, runtime "
          f"{args.runtime or 'the daemon default'}, the machine's background taken off; {load_line()}")
    print(f"  {'layer':<30} {'machine CPU a life':>18} {'/ bare':>7}  rounds")
    for cost in costs:
        print(f"  {cost.name:<30} {cost.cost_s * 1000:15.1f} ms {cost.over(floor):7.2f}  "
              f"{min(cost.rounds) * 1000:.0f}-{max(cost.rounds) * 1000:.0f} ms")
    return {"runs": args.runs, "each": args.each, "runtime": args.runtime,
            "layers": {c.name: {"machine_cpu_s": c.cost_s, "over_bare": c.over(floor), "rounds_s": list(c.rounds)}
                       for c in costs}}
