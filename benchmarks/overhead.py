"""ootci's own overhead on a small backend: ``ootci run --torch installed`` against the same
build command and ``python -m pytest`` run by hand with the same torch env's python.

    python benchmarks/overhead.py [--rounds 5] [--bundled] [--worker]

The backend is a copy of tests/fixtures/backends/pysrc (pure Python, src layout) with the
recipe ``ootci init`` drafts for it; ``--bundled`` measures backend/ (torch_openreg) too;
``--worker`` adds a third side, the same run in a warm process that ran one before
(``_warm_worker.py``: a fleet's worker pays ootci's start-up once, not per run).
Both sides are warm (one untimed round first: ootci's env and build dir exist, the hand env
exists, pip's and Python's caches are hot) and the minimum of ``--rounds`` is kept, for wall
time and, separately, the machine's busy CPU time (benchmarks/cpu_meter.py; the whole
machine is counted, so read it on a quiet one). By hand is the recipe's build command, then
its test command with a fresh Inductor cache (as each ootci run has), in a venv layered over
this interpreter's site-packages (what ``ootci run --torch installed`` builds on); ootci's
test requirements are already there, so installing
them is ootci's overhead, not the backend's work.

ootci's own sources are compiled to .pyc first, as the images do (docker/): where
PYTHONDONTWRITEBYTECODE is set and nothing compiled them, every ``ootci`` start compiles
them again, which is not the run's work. The CPU of each side's whole process tree
(sandboxed descendants included) is counted in a control group where one can be made
(``cpu_meter.TreeCpu``): unlike the machine's busy time, other jobs do not inflate it.

Targets: issue #31, ootci <= 1.2x by hand for the pure-Python backend, <= 1.05x for the
bundled one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_meter import CpuMeter, TreeCpu  # noqa: E402
from workers.pipeline.env.layered import layered_venv, purelib  # noqa: E402
from workers.pipeline.steps.recipe import expand, load_recipe  # noqa: E402

PYSRC = ROOT / "tests" / "fixtures" / "backends" / "pysrc"


class Sample(NamedTuple):
    """One run of one side: wall s, the machine's busy CPU-s, its own tree's CPU-s (None
    without a control group) and its steps' seconds."""

    wall_s: float
    cpu_s: float
    tree_cpu_s: float | None
    steps: dict[str, float]


@dataclass
class Timing:
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    tree_cpu_s: list[float] = field(default_factory=list)
    steps: list[dict[str, float]] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return min(self.wall_s)

    @property
    def cpu(self) -> float:
        return min(self.cpu_s)

    @property
    def tree_cpu(self) -> float | None:
        return min(self.tree_cpu_s) if self.tree_cpu_s else None

    def add(self, sample: Sample) -> None:
        self.wall_s.append(sample.wall_s)
        self.cpu_s.append(sample.cpu_s)
        if sample.tree_cpu_s is not None:
            self.tree_cpu_s.append(sample.tree_cpu_s)
        self.steps.append(sample.steps)

    def fastest_steps(self) -> dict[str, float]:
        return self.steps[self.wall_s.index(self.wall)]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env.update(extra)
    return env


def _say_if_not_quiet(what: str, meter: CpuMeter) -> None:
    if warning := meter.use.quiet_warning():
        print(f"  {what}: {warning}", flush=True)


def by_hand(backend: Path, python: Path, work: Path) -> Sample:
    """The recipe's build command, then its test command, as a developer runs them."""
    recipe = load_recipe(backend)
    env = _clean_env(**recipe.env)
    # A fresh Inductor/Triton cache each time, as ootci's runs have (run-private by design):
    # a warm one from the round before would make the hand's compile tests nearly free.
    compile_cache = Path(tempfile.mkdtemp(prefix="compile-cache-", dir=work))
    test_env = _clean_env(**recipe.test_env, TORCHINDUCTOR_CACHE_DIR=str(compile_cache / "inductor"),
                          TRITON_CACHE_DIR=str(compile_cache / "triton"))
    junit = work / "junit.xml"
    with CpuMeter() as meter, TreeCpu() as tree:
        start = time.perf_counter()
        subprocess.run(expand(recipe.build_command, python=str(python), junit=str(junit)), cwd=backend, env=env,
                       check=True, capture_output=True, preexec_fn=tree.enter)
        built = time.perf_counter()
        tests = subprocess.run(expand(recipe.test_command, python=str(python), junit=str(junit)), cwd=backend,
                               env=test_env, capture_output=True, text=True, preexec_fn=tree.enter)
        end = time.perf_counter()
    _say_if_not_quiet("by hand", meter)
    if tests.returncode != 0:
        sys.exit(f"the suite failed by hand:\n{tests.stdout[-3000:]}")
    return Sample(end - start, meter.use.busy_cpu_s, tree.cpu_s, {"build": built - start, "test": end - built})


def through_ootci(backend: Path, home: Path) -> Sample:
    with CpuMeter() as meter, TreeCpu() as tree:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "service.cli", "run", "--torch", "installed", "--backend", str(backend), "--json"],
            cwd=ROOT, env=_clean_env(OOTCI_HOME=str(home)), capture_output=True, text=True,
            preexec_fn=tree.enter,
        )
        elapsed = time.perf_counter() - start
    _say_if_not_quiet("ootci run", meter)
    if proc.returncode != 0:
        sys.exit(f"ootci run failed ({proc.returncode}):\n{proc.stderr[-3000:]}\n{proc.stdout[-3000:]}")
    (result,) = json.loads(proc.stdout)
    steps = {s["name"]: float(s["duration_s"]) for s in result["steps"]}
    steps["outside steps"] = elapsed - sum(steps.values())
    return Sample(elapsed, meter.use.busy_cpu_s, tree.cpu_s, steps)


class WarmWorker:
    """``_warm_worker.py`` in a control group of its own: one run per ``run()``, in a process
    that has run one before (a fleet's worker), its CPU the group's usage over the run."""

    def __init__(self, backend: Path, home: Path) -> None:
        self._tree = TreeCpu()
        self._tree.__enter__()  # left in close(), after the worker has gone
        self._proc = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "_warm_worker.py"), str(backend)], cwd=ROOT,
            env=_clean_env(OOTCI_HOME=str(home)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, preexec_fn=self._tree.enter,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            sys.exit("the warm worker did not start")

    def run(self) -> Sample:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with CpuMeter() as meter:
            cpu_before = self._tree.usage_s()
            start = time.perf_counter()
            self._proc.stdin.write("run\n")
            self._proc.stdin.flush()
            answer = self._proc.stdout.readline()
            elapsed = time.perf_counter() - start
            cpu_after = self._tree.usage_s()
        _say_if_not_quiet("warm worker", meter)
        if not answer:
            sys.exit(f"the warm worker died ({self._proc.wait()})")
        result = json.loads(answer)
        if result["state"] != "passed":
            sys.exit(f"the warm worker's run ended {result['state']}")
        steps = result["steps"]
        steps["outside steps"] = elapsed - sum(steps.values())
        tree_cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        return Sample(elapsed, meter.use.busy_cpu_s, tree_cpu, steps)

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._tree.__exit__()


def measure(name: str, backend: Path, rounds: int, tmp: Path, worker: bool) -> dict[str, Timing]:
    hand_env = layered_venv(tmp / f"{name}-hand-env", [purelib(Path(sys.prefix))], pth="_parent.pth")
    home = tmp / f"{name}-home"
    sides: dict[str, Callable[[], Sample]] = {
        "by hand": lambda: by_hand(backend, hand_env, tmp),
        "ootci run": lambda: through_ootci(backend, home),
    }
    warm = WarmWorker(backend, tmp / f"{name}-worker-home") if worker else None
    if warm is not None:
        sides["warm worker"] = warm.run
    try:
        for run in sides.values():
            run()  # warm: pip's cache, the page cache; ootci's env, build dir and database
        timings = {side: Timing() for side in sides}
        for _ in range(rounds):  # interleaved, so a busy stretch of the machine hits each
            for side, run in sides.items():
                timings[side].add(run())
    finally:
        if warm is not None:
            warm.close()
    return timings


def report(name: str, timings: dict[str, Timing], target: float) -> None:
    cores = len(os.sched_getaffinity(0))
    hand = timings["by hand"]
    print(f"{name}: by hand {hand.wall:.2f} s wall, {hand.cpu:.2f} CPU-s (floor {hand.cpu / cores:.2f} s)")
    for side, timing in timings.items():
        if side == "by hand":
            continue
        ratio = timing.wall / hand.wall
        print(f"  {side}: {timing.wall:.2f} s wall, {timing.cpu:.2f} CPU-s (floor {timing.cpu / cores:.2f} s); "
              f"ratio to by hand: wall {ratio:.2f}x (target <= {target}x, "
              f"{'met' if ratio <= target else 'missed'}), machine CPU {timing.cpu / hand.cpu:.2f}x")
        if hand.tree_cpu and timing.tree_cpu:
            print(f"    own process trees (cgroup, other jobs excluded): by hand {hand.tree_cpu:.2f} CPU-s, "
                  f"{side} {timing.tree_cpu:.2f} CPU-s: {timing.tree_cpu / hand.tree_cpu:.2f}x")
    for side, timing in timings.items():
        shares = ", ".join(f"{k} {v:.2f} s ({100 * v / timing.wall:.0f}%)"
                           for k, v in timing.fastest_steps().items())
        print(f"  {side}: {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bundled", action="store_true", help="measure backend/ (torch_openreg) too")
    parser.add_argument("--worker", action="store_true",
                        help="also run it in a warm worker process (a fleet's shape: no start-up per run)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", "service", "workers"], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(prefix="ootci-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        pysrc = tmp / "pysrc"
        shutil.copytree(PYSRC, pysrc)
        init = subprocess.run([sys.executable, "-m", "service.cli", "init", str(pysrc)], cwd=ROOT,
                              env=_clean_env(OOTCI_HOME=str(tmp / "init-home")), capture_output=True, text=True)
        if init.returncode != 0:
            sys.exit(f"ootci init failed:\n{init.stderr}")
        cases = [("pysrc", pysrc, 1.2)]
        if args.bundled:
            bundled = tmp / "backend"
            shutil.copytree(ROOT / "backend", bundled, symlinks=True,
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.so"))
            cases.append(("bundled torch_openreg", bundled, 1.05))
        for name, backend, target in cases:
            report(name, measure(name.split()[0], backend, args.rounds, tmp, args.worker), target)
    load1, load5, _ = os.getloadavg()
    print(f"{len(os.sched_getaffinity(0))} cores; load average (1, 5 min): {load1:.2f}, {load5:.2f}")


if __name__ == "__main__":
    main()
