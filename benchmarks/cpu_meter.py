"""How busy the machine's cores were over a stretch of wall time, from /proc/stat.

A benchmark that misses a wall-time target on a small machine has to say whether the
target was reachable at all: if the work kept every core busy, no scheduling can make it
faster, only less work or more cores. The whole machine is counted (the runs' process
trees are deep, sandboxed and partly re-parented), so read it on a quiet machine; the
benchmarks print the load average beside it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_TICKS = os.sysconf("SC_CLK_TCK")


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
        self._start_wall = time.monotonic()
        self._start_busy = _busy_ticks()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.use = CpuUse(
            wall_s=time.monotonic() - self._start_wall,
            busy_cpu_s=(_busy_ticks() - self._start_busy) / _TICKS,
            cores=len(os.sched_getaffinity(0)),
        )
