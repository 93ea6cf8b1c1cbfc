"""The CPU meter says when a benchmark's machine was not quiet: the CPU that processes
outside the benchmark's own process tree used meanwhile (``benchmarks/cpu_meter.py``)."""

from __future__ import annotations

import os

from benchmarks.cpu_meter import CpuUse, _others_ticks, _processes

ME = 100


def test_only_processes_outside_the_tree_count_and_only_what_they_used_meanwhile() -> None:
    before = {
        ME: (1, 50, 1_000),
        101: (ME, 60, 10),  # my child
        200: (1, 70, 500),  # a stray process, busy throughout
        300: (1, 80, 40),  # a pid that ends and is reused by another process
    }
    after = {
        ME: (1, 50, 1_900),
        101: (ME, 60, 800),
        102: (101, 90, 300),  # my grandchild, started meanwhile
        103: (1, 95, 7),  # started meanwhile outside the tree
        200: (1, 70, 1_400),
        300: (1, 99, 25),  # a new process under an old pid: all its ticks are new
    }
    assert _others_ticks(before, after, ME) == (1_400 - 500) + 7 + 25


def test_descendants_are_found_whatever_order_their_pids_come_in() -> None:
    after = {5: (9, 1, 10), 9: (7, 1, 10), 7: (ME, 1, 10), ME: (1, 1, 0), 11: (1, 1, 3)}
    assert _others_ticks({}, after, ME) == 3


def test_the_snapshot_reads_this_process_and_its_parent() -> None:
    me = _processes()[os.getpid()]
    assert me[0] == os.getppid() and me[2] >= 0


def test_a_busy_stranger_makes_the_stretch_not_quiet() -> None:
    quiet = CpuUse(wall_s=10.0, busy_cpu_s=19.0, cores=2, others_cpu_s=0.5)
    loud = CpuUse(wall_s=10.0, busy_cpu_s=20.0, cores=2, others_cpu_s=9.0)
    assert quiet.quiet_warning() == ""
    assert loud.quiet_warning().startswith("NOT QUIET: other processes used 9 CPU-s (45% ")


# A process of its own: a subreaper adopts orphans for the rest of its life.
_ORPHAN = """
import os, resource, sys, time
sys.path.insert(0, {root!r})
from benchmarks.cpu_meter import adopt_orphans, reap_adopted

adopt_orphans()
if os.fork() == 0:            # the child leaves an orphan behind that burns CPU, then dies
    if os.fork() == 0:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        os._exit(0)
    os._exit(0)
os.wait()
adopted = reap_adopted(wait_s=30)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(*adopted, usage.ru_utime + usage.ru_stime)
"""


def test_an_orphans_cpu_is_counted_once_adopted_and_reaped() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[3])
    done = subprocess.run([sys.executable, "-c", _ORPHAN.format(root=root)],
                          capture_output=True, text=True, timeout=60, check=True)
    reaped, running, cpu_s = done.stdout.split()
    assert (reaped, running) == ("1", "0")
    assert float(cpu_s) >= 0.3  # without the adoption, init would have reaped it
