"""The test step's cost, before and after "test less twice" (issue #31 item 3), in one run.

    python benchmarks/test_step_cost.py [--backend backend] [--torch installed]
        [--processes 1] [--rounds 1] [--plant] [--sandbox] [--only before|after]

Runs the pipeline's test step (``run_tests``: crash isolation, per-test limits, the rerun
of failures, the sandbox a run's suite gets) on the same suite in both modes, alternately,
each time in a fresh run dir of its own, as a run would (its HOME, TMPDIR and, after, its
compile cache: nothing warm is carried from one to the next):

- before: no run compile cache (Inductor's default under the run's TMPDIR) and every
  restart or rerun of failures collects the whole suite again;
- after: one Inductor/Triton cache per run (``testrun/compile_cache.py``) and restarts and
  reruns collect only the files that still have a test to run (``collect_once``).

A green suite runs in one pytest process, where neither changes anything; ``--plant``
runs a copy of the backend whose last test file (planted here) fails one test and crashes
in another, so the step restarts pytest once and reruns the failure once, as a run with a
broken kernel does.

It prints each mode's CPU seconds (the step's own process tree: ``getrusage`` of the
children, which other work on the machine does not inflate), wall seconds, the machine's
busy CPU and the floor it sets (benchmarks/cpu_meter.py), the pytest processes started, and
the ratios after/before. Both modes must record the same tests with the same outcomes.
``--sandbox`` runs the suite sealed as a run does; bwrap's pid namespace hides its children
from ``getrusage``, so the step's CPU is then the machine's busy CPU only (read it on a
quiet machine). Target: test-step CPU <= 0.7x before (issue #31). An already-built backend
is needed (``make backend`` for the bundled one).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_meter import CpuMeter, CpuUse  # noqa: E402
from service.config import Settings  # noqa: E402
from workers.pipeline.env.provision import provision  # noqa: E402
from workers.pipeline.env.resolve import parse_spec  # noqa: E402
from workers.pipeline.env.torch_env import TorchEnv  # noqa: E402
from workers.pipeline.isolation.child_env import ChildEnvPolicy, child_environment  # noqa: E402
from workers.pipeline.logs.sink import LogSink  # noqa: E402
from workers.pipeline.steps.recipe import Recipe, load_recipe  # noqa: E402
from workers.pipeline.testrun.compile_cache import compile_cache_scope  # noqa: E402
from workers.pipeline.testrun.records import TestRunOutcome  # noqa: E402
from workers.pipeline.testrun.runner import TestRunOptions, run_tests  # noqa: E402
from workers.pipeline.testrun.suite_sandbox import suite_sandbox  # noqa: E402

MODES = ("before", "after")
PLANTED = "test_zz_planted_by_benchmark.py"


@dataclass(frozen=True)
class Measured:
    mode: str
    cpu_s: float
    wall_s: float
    machine: CpuUse
    processes: int
    outcome: TestRunOutcome


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def _run_scope(run_dir: Path, after: bool) -> Iterator[None]:
    """What a run's code path sets up around its steps: the child env policy and, after,
    the run's compile cache."""
    with child_environment(ChildEnvPolicy.for_run(Settings(), run_dir)):
        if after:
            with compile_cache_scope(run_dir):
                yield
        else:
            yield


def measure(mode: str, recipe: Recipe, env: TorchEnv, run_dir: Path, processes: int,
            sandboxed: bool) -> Measured:
    settings = Settings(home=run_dir / "home-ootci", sandbox=sandboxed)
    after = mode == "after"
    work_dir = run_dir / "test"
    with _run_scope(run_dir, after):
        policy = ChildEnvPolicy.for_run(settings, run_dir)
        sandbox = suite_sandbox(settings, policy, env, build_dir=recipe.source_dir / "build",
                                source_dir=recipe.source_dir, work_dir=work_dir,
                                run_dir=run_dir) if sandboxed else None
        options = TestRunOptions.of_settings(settings, sandbox=sandbox, processes=processes,
                                             collect_once=after)
        with LogSink(run_dir / "test.log") as log, CpuMeter() as meter:
            cpu_before, started = _children_cpu_s(), time.monotonic()
            outcome = run_tests(recipe, env, work_dir, log, options)
            wall, cpu = time.monotonic() - started, _children_cpu_s() - cpu_before
    if sandboxed:
        cpu = meter.use.busy_cpu_s  # bwrap's children never reach our rusage
    text = (run_dir / "test.log").read_text(encoding="utf-8", errors="replace")
    return Measured(mode, cpu, wall, meter.use, text.count("ootci: pytest run "), outcome)


def planted_copy(backend: Path, into: Path) -> Path:
    """``backend`` without its build output, and a last test file that fails one test and
    kills pytest in the next (the installed package is what the suite imports)."""
    copy = into / backend.name
    shutil.copytree(backend, copy, ignore=shutil.ignore_patterns(
        "build", "third_party", "__pycache__", "*.so", "*.egg-info"))
    (copy / "tests" / PLANTED).write_text(textwrap.dedent("""\
        import os

        def test_planted_failure():
            assert 1 == 2, "planted by benchmarks/test_step_cost.py"

        def test_planted_crash():
            os.abort()

        def test_after_the_planted_crash():
            pass
        """))
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", type=Path, default=ROOT / "backend")
    parser.add_argument("--torch", default="installed")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--plant", action="store_true")
    parser.add_argument("--sandbox", action="store_true")
    parser.add_argument("--only", choices=MODES)
    args = parser.parse_args()
    modes = (args.only,) if args.only else MODES
    results: dict[str, list[Measured]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="ootci-test-cost-") as tmp:
        backend = args.backend.resolve()
        recipe = load_recipe(planted_copy(backend, Path(tmp)) if args.plant else backend)
        with LogSink(Path(tmp) / "provision.log") as log:
            env = provision(parse_spec(args.torch), Path(tmp) / "cache", log)
        load_before = os.getloadavg()
        for round_ in range(args.rounds):
            for mode in modes:
                run_dir = Path(tmp) / f"run-{round_}-{mode}"
                m = measure(mode, recipe, env, run_dir, args.processes, args.sandbox)
                results[mode].append(m)
                print(f"round {round_} {mode:6}: {m.cpu_s:6.1f} CPU-s, {m.wall_s:6.1f} s wall, "
                      f"{m.processes} pytest processes; {m.outcome.step.status}: "
                      f"{m.outcome.step.summary}; machine: {m.machine.line()}", flush=True)
        load_after = os.getloadavg()
    best = {mode: min(runs, key=lambda m: m.cpu_s) for mode, runs in results.items()}
    print(f"suite: {backend}{' + a planted failure and crash' if args.plant else ''}, "
          f"torch {args.torch}, {args.processes} process(es), "
          f"sandbox {'on' if args.sandbox else 'off'}, min of {args.rounds}")
    for mode, m in best.items():
        print(f"{mode:6}: {m.cpu_s:6.1f} CPU-s  {m.wall_s:6.1f} s wall  floor "
              f"{m.machine.floor_s:5.1f} s ({m.machine.busy_cores:.2f} of {m.machine.cores} "
              f"cores busy)  {m.processes} pytest processes")
    if len(best) == 2:
        before, after = best["before"], best["after"]
        print(f"ratio after/before: CPU {after.cpu_s / before.cpu_s:.2f} (target <= 0.7), "
              f"wall {after.wall_s / before.wall_s:.2f}")
        same = ({r.nodeid: r.outcome for r in before.outcome.results}
                == {r.nodeid: r.outcome for r in after.outcome.results})
        print(f"same records: {same} ({len(before.outcome.results)}); same verdict: "
              f"{before.outcome.step.status == after.outcome.step.status}")
        if not same:
            sys.exit("the two modes recorded different tests or outcomes")
    print(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f}")


if __name__ == "__main__":
    main()
