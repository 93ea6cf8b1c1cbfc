"""How busy the machine's cores were over a stretch of wall time, from /proc/stat.

A benchmark that misses a wall-time target on a small machine has to say whether the
target was reachable at all: if the work kept every core busy, no scheduling can make it
faster, only less work or more cores. The whole machine is counted (the runs' process
trees are deep, sandboxed and partly re-parented), so read it on a quiet machine. Whether
it was quiet is measured too: the CPU that processes outside the benchmark's own process
tree used meanwhile (``others_cpu_s``; a long-running stray process is what this catches,
one that starts and ends within the stretch is missed), and ``quiet_warning`` says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")
# Processes outside the benchmark using more than this share of the cores make it not quiet.
QUIET_SHARE = 0.05


def _processes() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, start time, CPU ticks) of every process now."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        # After the command's ")": state ppid ... utime(12) stime(13) ... starttime(20)
        found[int(entry.name)] = (int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]))
    return found


def _others_ticks(before: dict[int, tuple[int, int, int]],
                  after: dict[int, tuple[int, int, int]], me: int) -> int:
    """CPU ticks used between the two snapshots by processes not descended from ``me``."""
    mine = {me}
    changed = True
    while changed:  # descendants by ppid, whatever order pids were handed out in
        changed = False
        for pid, (ppid, _, _) in after.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    used = 0
    for pid, (_, start, ticks) in after.items():
        if pid in mine:
            continue
        earlier = before.get(pid)
        used += ticks - earlier[2] if earlier is not None and earlier[1] == start else ticks
    return used


def _busy_ticks() -> int:
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle  # guest time is already inside user


@dataclass(frozen=True)
class CpuUse:
    wall_s: float
    busy_cpu_s: float
    cores: int
    others_cpu_s: float = 0.0  # of ``busy_cpu_s``: processes outside the benchmark's tree

    def quiet_warning(self) -> str:
        """One line when other processes kept the machine busy meanwhile, else ''."""
        share = self.others_cpu_s / self.wall_s / self.cores if self.wall_s else 0.0
        if share <= QUIET_SHARE:
            return ""
        return (f"NOT QUIET: other processes used {self.others_cpu_s:.0f} CPU-s "
                f"({share:.0%} of the cores) meanwhile; wall times and the floor are inflated")

    @property
    def busy_cores(self) -> float:
        """Cores busy on average over the stretch."""
        return self.busy_cpu_s / self.wall_s if self.wall_s else 0.0

    @property
    def busy_share(self) -> float:
        """The share of the cores busy on average: on more workers, the same work cannot
        take less than this share of the time."""
        return self.busy_cores / self.cores

    @property
    def floor_s(self) -> float:
        """The least wall time this much CPU work can take on this machine."""
        return self.busy_cpu_s / self.cores

    def line(self) -> str:
        return (f"{self.busy_cpu_s:.0f} CPU-s busy, {self.busy_cores:.2f} of {self.cores} cores on average; "
                f"the same work cannot take less than {self.floor_s:.0f} s here")


class CpuMeter:
    """``with CpuMeter() as meter: ...`` then ``meter.use``."""

    def __enter__(self) -> CpuMeter:
        self._start_procs = _processes()
        self._start_wall = time.monotonic()
        self._start_busy = _busy_ticks()
        return self

    def __exit__(self, *_exc: object) -> None:
        wall, busy = time.monotonic() - self._start_wall, _busy_ticks() - self._start_busy
        others = _others_ticks(self._start_procs, _processes(), os.getpid())
        self.use = CpuUse(
            wall_s=wall,
            busy_cpu_s=busy / _TICKS,
            cores=len(os.sched_getaffinity(0)),
            others_cpu_s=others / _TICKS,
        )


# Orphans: a process whose parent ended is handed to the nearest "child subreaper" ancestor
# (else init), and its CPU reaches getrusage(RUSAGE_CHILDREN) only of whoever reaps it. A
# benchmark that measures a step by its children's rusage must adopt them, or the CPU of
# e.g. a fork server that a crashed pytest left running goes unmeasured.
_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the subreaper of its descendants' orphans (Linux >= 3.4)."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_adopted(wait_s: float = 30.0) -> tuple[int, int]:
    """Reap the orphans adopted so far, waiting up to ``wait_s`` for those still running,
    so that their CPU counts in ``RUSAGE_CHILDREN``; (reaped, still running). Call it only
    when no child of ours is meant to be running (it waits for any child)."""
    reaped, deadline = 0, time.monotonic() + wait_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped, 0
        if pid:
            reaped += 1
            continue
        if time.monotonic() >= deadline:
            me = os.getpid()
            return reaped, sum(1 for ppid, _, _ in _processes().values() if ppid == me)
        time.sleep(0.05)


# The CPU of one command's whole process tree, sandboxed descendants included: a
# control group counts every process started in it, whoever reaps it (bwrap's children
# never reach our getrusage, and /proc snapshots miss short-lived processes). Needs a
# writable cpuacct (cgroup v1) or cgroup2 hierarchy: root on a VM or a privileged box.
_CGROUP_ROOTS = (("/sys/fs/cgroup/cpuacct", "cpuacct.usage"),
                 ("/sys/fs/cgroup/unified", "cpu.stat"),
                 ("/sys/fs/cgroup", "cpu.stat"))


class TreeCpu:
    """``with TreeCpu() as tree: subprocess.run(cmd, preexec_fn=tree.enter)`` then
    ``tree.cpu_s``: the CPU seconds of every process the command started, or None where no
    control group can be made here."""

    def __init__(self) -> None:
        self.cpu_s: float | None = None
        self._dir: str | None = None
        self._usage = ""

    def __enter__(self) -> TreeCpu:
        for root, usage in _CGROUP_ROOTS:
            path = os.path.join(root, f"ootci-bench-{os.getpid()}-{time.monotonic_ns()}")
            with contextlib.suppress(OSError):
                if os.path.exists(os.path.join(root, usage)):
                    os.mkdir(path)
                    self._dir, self._usage = path, usage
                    break
        return self

    def enter(self) -> None:
        """A subprocess's preexec_fn: the child joins the group before it execs."""
        if self._dir is not None:
            with open(os.path.join(self._dir, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))

    def usage_s(self) -> float | None:
        """The group's CPU seconds so far (a long-lived process's share of a stretch is
        the difference of two readings); None without a group."""
        if self._dir is None:
            return None
        with open(os.path.join(self._dir, self._usage)) as usage:
            text = usage.read()
        if self._usage == "cpuacct.usage":
            return int(text) / 1e9
        fields = dict(line.split() for line in text.splitlines())
        return int(fields["usage_usec"]) / 1e6

    def __exit__(self, *_exc: object) -> None:
        self.cpu_s = self.usage_s()
        if self._dir is None:
            return
        for _ in range(50):  # the group goes once its last process has
            try:
                os.rmdir(self._dir)
                return
            except OSError:
                time.sleep(0.1)
