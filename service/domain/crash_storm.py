"""Crash storms: when one cause crashes test after test, stop restarting pytest.

The test step restarts pytest after every crash without the tests already recorded, so one
bad kernel costs one result. A torch whose ``manual_seed`` segfaults crashes *every* test
that seeds: restarting then costs a whole interpreter start per test (174 restarts in 13
minutes, seen on a real run) and says nothing new after the second one.

``crash_signature(signal_text, tail, nodeid)`` names a crash by what crashed, not by which
test: the signal and the innermost frame of faulthandler's dump (where the process was when
it died), else the signal and the crashing test *function* (its parametrisations crash
alike). ``CrashStorm`` counts signatures; the third crash with one signature is a storm,
and a per-step restart budget bounds everything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# faulthandler: `Current thread 0x... (most recent call first):` then `  File "f", line N in fn`.
_STACK_HEADER = re.compile(r"^(?:Current thread|Thread) .*\(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+ in (?P<function>\S+)')
_PARAMETRISATION = re.compile(r"\[.*\]$")

STORM_AFTER = 3  # crashes with one signature
DEFAULT_RESTART_BUDGET = 50  # pytest restarts per step, whatever crashed


def innermost_frame(tail: Iterable[str]) -> str | None:
    """``file-tail:function`` of the first frame of the crashing thread's dump, or None.
    The file keeps only its path from the package down (``torch/random.py``), so the
    signature is the same in every env and machine. faulthandler dumps every thread; the
    one that crashed is ``Current thread``: the first frame of another thread (a timer of
    pytest-timeout, a data loader) is only taken when no dump says which one crashed."""
    current: str | None = None
    other: str | None = None
    header: str | None = None  # the header of the dump being read, until its first frame
    for line in tail:
        if _STACK_HEADER.match(line.strip()):
            header = line.strip()
            continue
        if header is None:
            continue
        match = _FRAME.match(line)
        if match:
            frame = f"{_short_path(match['file'])}:{match['function']}"
            if header.startswith("Current thread"):
                current = current or frame
            else:
                other = other or frame
        header = None
    return current or other


def _short_path(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1:])
    return "/".join(parts[-2:])


def function_of(nodeid: str) -> str:
    """``tests/test_x.py::TestA::test_y[float32]`` -> ``tests/test_x.py::TestA::test_y``."""
    return _PARAMETRISATION.sub("", nodeid)


def crash_signature(signal_text: str, tail: Iterable[str], nodeid: str) -> str:
    frame = innermost_frame(tail)
    where = f"in {frame}" if frame else f"in test {function_of(nodeid)}"
    return f"{signal_text} {where}"


@dataclass
class CrashStorm:
    """The crashes of one test step so far; ``record`` says when to stop restarting."""

    storm_after: int = STORM_AFTER
    restart_budget: int = DEFAULT_RESTART_BUDGET
    first_by_signature: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    restarts: int = 0

    def record(self, signature: str, nodeid: str) -> str | None:
        """Count one crash; the reason to stop restarting pytest, or None to go on."""
        self.first_by_signature.setdefault(signature, nodeid)
        self.counts[signature] = self.counts.get(signature, 0) + 1
        self.restarts += 1
        if self.counts[signature] >= self.storm_after:
            first = self.first_by_signature[signature]
            return (f"crash storm: {self.counts[signature]} tests crashed the same way "
                    f"({signature}), first {first}")
        if self.restarts >= self.restart_budget:
            return (f"restart budget spent: pytest crashed {self.restarts} times in this "
                    f"step ({len(self.counts)} different crashes)")
        return None

    def not_run_message(self, signature: str | None) -> str:
        """What the tests the step did not get to are told."""
        if signature is not None and signature in self.first_by_signature:
            return f"not run: same crash as {self.first_by_signature[signature]}"
        return "not run: the step's restart budget was spent on crashes"
