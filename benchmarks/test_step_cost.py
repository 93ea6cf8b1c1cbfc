"""The test step's cost, before and after "test less twice" (issue #31 item 3), in one run.

    python benchmarks/test_step_cost.py [--backend backend] [--torch installed]
        [--processes 1] [--rounds 1] [--plant] [--sandbox] [--only before|after]
        [--baseline-tests DIR [--same-pipeline]] [--files test_a.py,test_b.py]

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

A change to the suite itself (the preloaded interpreter of the backend's tests) is compared
with ``--baseline-tests DIR``: before runs the backend with DIR as its tests (e.g. main's
``backend/tests``, exported to /tmp), after with its own; test files only one side has are
left out, so both record the same tests. ``--same-pipeline`` runs both with the after
pipeline, so only the suite differs. ``--files`` keeps only the named test files. When an
old tests dir no longer passes on the current backend, the baseline is today's tests with
the change undone (README.md, section Benchmarks, says how for the preloaded interpreter);
the run exits when the two sides do not record the same tests with the same outcomes, and
prints the tests that did not pass.

Processes a step leaves behind (a fork server whose pytest crashed, a test's daemon) are
re-parented to this process (``cpu_meter.adopt_orphans``) and reaped after the step, so
their CPU is in the step's rusage too.
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

from benchmarks.cpu_meter import CpuMeter, CpuUse, adopt_orphans, reap_adopted  # noqa: E402
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
    orphans: tuple[int, int] = (0, 0)  # adopted and reaped, still running after the wait


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
            sandboxed: bool, after: bool) -> Measured:
    """One step in ``mode``; ``after``: with the after pipeline."""
    settings = Settings(home=run_dir / "home-ootci", sandbox=sandboxed)
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
            wall = time.monotonic() - started
            orphans = reap_adopted()
            cpu = _children_cpu_s() - cpu_before
    if sandboxed:
        cpu = meter.use.busy_cpu_s  # bwrap's children never reach our rusage
    text = (run_dir / "test.log").read_text(encoding="utf-8", errors="replace")
    return Measured(mode, cpu, wall, meter.use, text.count("ootci: pytest run "), outcome,
                    orphans)


def suite_copy(backend: Path, into: Path, *, tests: Path | None = None,
               keep: set[str] | None = None, plant: bool = False) -> Path:
    """``backend`` without its build output (the installed package is what the suite
    imports), with ``tests`` as its tests dir if given, only the test files in ``keep`` if
    given, and with ``plant`` a last test file that fails one test and kills pytest in the
    next."""
    copy = into / backend.name
    shutil.copytree(backend, copy, ignore=shutil.ignore_patterns(
        "build", "__pycache__", "*.so", "*.egg-info"))
    if tests is not None:
        shutil.rmtree(copy / "tests")
        shutil.copytree(tests, copy / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    if keep is not None:
        for path in (copy / "tests").glob("test_*.py"):
            if path.name not in keep:
                path.unlink()
    if plant:
        _plant(copy / "tests")
    return copy


def _test_files(tests: Path) -> set[str]:
    return {p.name for p in tests.glob("test_*.py")}


def _plant(tests: Path) -> None:
    (tests / PLANTED).write_text(textwrap.dedent("""\
        import os

        def test_planted_failure():
            assert 1 == 2, "planted by benchmarks/test_step_cost.py"

        def test_planted_crash():
            os.abort()

        def test_after_the_planted_crash():
            pass
        """))


def recipes(args: argparse.Namespace, backend: Path, tmp: Path) -> dict[str, Recipe]:
    """The suite each mode runs: the same one, unless --baseline-tests or --files."""
    if args.baseline_tests is None and args.files is None:
        copy = suite_copy(backend, tmp / "suite", plant=True) if args.plant else backend
        return {mode: load_recipe(copy) for mode in MODES}
    own = backend / "tests"
    baseline = args.baseline_tests.resolve() if args.baseline_tests else own
    both = _test_files(own) & _test_files(baseline)
    for name, tests in (("before", baseline), ("after", own)):
        if left := sorted(_test_files(tests) - both):
            print(f"{name}: leaves out {', '.join(left)} (not on the other side)")
    keep = both if args.files is None else both & set(args.files.split(","))
    return {mode: load_recipe(suite_copy(backend, tmp / f"suite-{mode}", keep=keep,
                                         tests=baseline if mode == "before" else None,
                                         plant=args.plant))
            for mode in MODES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", type=Path, default=ROOT / "backend")
    parser.add_argument("--torch", default="installed")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--plant", action="store_true")
    parser.add_argument("--sandbox", action="store_true")
    parser.add_argument("--only", choices=MODES)
    parser.add_argument("--baseline-tests", type=Path,
                        help="the tests dir before runs (after runs the backend's own)")
    parser.add_argument("--same-pipeline", action="store_true",
                        help="both modes with the after pipeline: only the suite differs")
    parser.add_argument("--files", help="only these test files (comma-separated names)")
    args = parser.parse_args()
    adopt_orphans()
    modes = (args.only,) if args.only else MODES
    results: dict[str, list[Measured]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="ootci-test-cost-") as tmp:
        backend = args.backend.resolve()
        suites = recipes(args, backend, Path(tmp))
        with LogSink(Path(tmp) / "provision.log") as log:
            env = provision(parse_spec(args.torch), Path(tmp) / "cache", log)
        load_before = os.getloadavg()
        for round_ in range(args.rounds):
            for mode in modes:
                run_dir = Path(tmp) / f"run-{round_}-{mode}"
                m = measure(mode, suites[mode], env, run_dir, args.processes, args.sandbox,
                            after=mode == "after" or args.same_pipeline)
                results[mode].append(m)
                orphans = (f"; {m.orphans[0]} orphans reaped, {m.orphans[1]} left running"
                           if any(m.orphans) else "")
                warning = m.machine.quiet_warning()
                print(f"round {round_} {mode:6}: {m.cpu_s:6.1f} CPU-s, {m.wall_s:6.1f} s wall, "
                      f"{m.processes} pytest processes; {m.outcome.step.status}: "
                      f"{m.outcome.step.summary}; machine: {m.machine.line()}{orphans}"
                      f"{'; ' + warning if warning else ''}", flush=True)
                for r in m.outcome.results:
                    if r.outcome not in ("passed", "skipped"):
                        print(f"  {r.outcome}: {r.nodeid}: {(r.message or '')[:300]}",
                              flush=True)
        load_after = os.getloadavg()
    best = {mode: min(runs, key=lambda m: m.cpu_s) for mode, runs in results.items()}
    suite = (f"{args.baseline_tests} (before) vs {backend / 'tests'} (after)"
             if args.baseline_tests else str(backend))
    print(f"suite: {suite}{' + a planted failure and crash' if args.plant else ''}"
          f"{', files ' + args.files if args.files else ''}, "
          f"{'same pipeline (after), ' if args.same_pipeline else ''}"
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
