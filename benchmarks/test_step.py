"""The test step of a suite, serial vs split over the worker's cores, in one run.

    python benchmarks/test_step.py [--backend backend] [--torch installed] [--processes 2]

Runs ``run_tests`` (the pipeline's test step, with its crash isolation and rerun of
failures) on the same suite twice, serial then parallel, against an already-built backend
(``make backend`` for the bundled one), and checks that both record the same tests with
the same outcomes and the same verdict. Target (issue #19): parallel <= 0.6x serial on the
2-core reference machine. The load average is printed: other work on the machine shifts
the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.config import Settings  # noqa: E402
from workers.pipeline.env.provision import provision  # noqa: E402
from workers.pipeline.env.resolve import parse_spec  # noqa: E402
from workers.pipeline.logs.sink import LogSink  # noqa: E402
from workers.pipeline.steps.recipe import load_recipe  # noqa: E402
from workers.pipeline.testrun.records import TestRunOutcome  # noqa: E402
from workers.pipeline.testrun.runner import TestRunOptions, run_tests  # noqa: E402


def timed(backend: Path, torch: str, work: Path, processes: int) -> tuple[float, TestRunOutcome]:
    settings = Settings()
    with LogSink(work / "provision.log") as log:
        env = provision(parse_spec(torch), work / "cache", log)
    with LogSink(work / "test.log") as log:
        start = time.perf_counter()
        result = run_tests(
            load_recipe(backend),
            env,
            work / "test",
            log,
            TestRunOptions(timeout_s=settings.step_timeout_s,
                           per_test_timeout_s=settings.test_timeout_s, processes=processes),
        )
        return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", type=Path, default=ROOT / "backend")
    parser.add_argument("--torch", default="installed")
    parser.add_argument("--processes", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    backend = args.backend.resolve()
    with tempfile.TemporaryDirectory(prefix="ootci-test-step-") as tmp:
        load_before = os.getloadavg()
        serial_s, serial = timed(backend, args.torch, Path(tmp) / "serial", 1)
        parallel_s, parallel = timed(backend, args.torch, Path(tmp) / "parallel", args.processes)
        load_after = os.getloadavg()
    same = {r.nodeid: r.outcome for r in serial.results} == {
        r.nodeid: r.outcome for r in parallel.results
    }
    print(f"suite: {backend} ({len(serial.results)} records), torch spec {args.torch}")
    print(f"serial:   {serial_s:6.1f} s  {serial.step.status}: {serial.step.summary}")
    print(f"parallel: {parallel_s:6.1f} s  {parallel.step.status}: {parallel.step.summary}"
          f"  ({args.processes} processes)")
    print(f"ratio parallel/serial: {parallel_s / serial_s:.2f}  (target <= 0.6)")
    print(f"same records: {same}; same verdict: {serial.step.status == parallel.step.status}")
    print(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f}"
          f" on {os.cpu_count()} cores")
    if not same:
        sys.exit("the parallel step recorded something else than the serial one")


if __name__ == "__main__":
    main()
