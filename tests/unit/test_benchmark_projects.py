"""The benchmarks' generated eval is one the tool accepts, with every option the benchmark offers.

A benchmark that breaks only shows when someone reruns it for figures; this keeps its input valid."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.gateway.script import load_script


@pytest.fixture(scope="module")
def perf() -> ModuleType:
    from benchmarks import perf

    return perf


@pytest.mark.parametrize(("tool_calls", "delay", "cpus", "runtime"),
                         [(1, 0.0, None, None), (8, 0.5, 2.0, None), (3, 0.0, 0.5, "crun"), (1, 0.0, None, "crun")])
def test_the_trivial_eval_loads_with_each_option(perf: ModuleType, tmp_path: Path, tool_calls: int, delay: float,
                                                 cpus: float | None, runtime: str | None) -> None:
    eval_yaml = perf.trivial_project(tmp_path / "project", 3, tool_calls, delay, cpus, runtime)
    loaded = load_eval_config(eval_yaml)
    assert loaded.config.sandbox.cpus == (cpus if cpus is not None else 1)
    assert loaded.config.sandbox.runtime == runtime
    assert [j.name for j in loaded.config.judges] == ["exited"]
    script = load_script(tmp_path / "project" / "cases" / "c0002" / "model_script.yaml")
    assert [s.calls[0].tool if s.calls else None for s in script.steps] == ["Bash"] * tool_calls + [None]
    assert {s.delay_s for s in script.steps} == {delay}


def test_the_machine_cpu_sampler_reads_a_busy_stretch(perf: ModuleType) -> None:
    """What `e2e` reports as a case's machine CPU: a stretch this process keeps one core busy reads
    as at least most of that stretch (the machine's other work can only add to it)."""
    import time

    with perf.MachineCpu() as machine:
        time.sleep(0.1)
        start = time.time()
        while time.time() - start < 0.5:
            pass
        end = time.time()
        time.sleep(0.1)
    assert machine.busy_s(start, end) >= 0.3
    assert machine.busy_s(start, start) == 0


def test_a_round_s_ratios_come_from_its_own_runs(perf: ModuleType) -> None:
    def measure(span_s: float) -> object:
        cases = [{"started_at": 100.0, "duration_s": span_s - 1.0}, {"started_at": 101.0, "duration_s": span_s - 1.0}]
        return perf.RunMeasure(wall_s=span_s + 2.0, run_dir=Path("unused"), cases=cases)

    one = perf.E2eRound(p1=measure(8.0), p2=measure(5.0), host_sequential_s=6.0, host_pairs_s=3.75,
                        p2_cpu_per_case_s=0.66, host_pairs_cpu_per_case_s=0.40)
    assert one.speedup_over_ceiling() == pytest.approx((8.0 / 5.0) / (6.0 / 3.75))
    assert one.cpu_over_host() == pytest.approx(1.65)
    assert perf.spread([0.91, 0.74, 0.8]) == "rounds 0.74-0.91"


def test_what_the_poll_saw_a_case_is_the_longer_run_s_beyond_the_shorter_one_s(perf: ModuleType) -> None:
    short = {"claude": 2.0, "docker-init": 0.1}
    long = {"claude": 8.0, "docker-init": 0.4, "bash": 0.06}
    per_case = perf.marginal_in_containers(short, long, 6)
    assert per_case == pytest.approx({"claude": 1.0, "docker-init": 0.05, "bash": 0.01})
    assert list(per_case) == ["claude", "docker-init", "bash"]
    assert perf.marginal_in_containers({"gone": 0.6}, {}, 6) == pytest.approx({"gone": -0.1})
