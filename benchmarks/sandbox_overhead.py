"""What the sandbox costs a step: starting a process in it versus plain, setting it up
once before the step (``prepare``: the dirs handed over and bwrap's set-up checked with
``true``), and one disk budget check over a large tree (this checkout's .venv stands in
for a build dir).

    .venv/bin/python benchmarks/sandbox_overhead.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from service.config import Settings
from workers.pipeline.isolation.sandbox import DiskBudget, probe, sandbox_for_tests

ROUNDS = 20


def _spawn(cmd: list[str], preexec: object, cwd: Path) -> float:
    start = time.perf_counter()
    for _ in range(ROUNDS):
        subprocess.run(cmd, cwd=cwd, env={"PATH": os.environ["PATH"]}, check=True,
                       preexec_fn=preexec)  # type: ignore[arg-type]
    return (time.perf_counter() - start) / ROUNDS


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home")
        print(f"support: {probe(settings.sandbox_uid).describe()}")
        sandbox = sandbox_for_tests(settings, writable=[Path(tmp) / "w"], visible=[root],
                                    watched=[], tmp=Path(tmp) / "t")
        start = time.perf_counter()
        for _ in range(ROUNDS):
            sandbox.prepare()
        prepared = (time.perf_counter() - start) / ROUNDS
        print(sandbox.describe())
        print(f"prepare (set-up check before each step): {prepared * 1000:.1f} ms")
        cmd = [sys.executable, "-c", "pass"]
        plain = _spawn(cmd, None, root)
        boxed = _spawn(sandbox.command(cmd, root), sandbox.preexec(), root)
        print(f"python -c pass: plain {plain * 1000:.1f} ms, sandboxed {boxed * 1000:.1f} ms, "
              f"ratio {boxed / plain:.2f}")
    tree = root / ".venv" if (root / ".venv").is_dir() else Path(sys.prefix)  # a worktree
    files = sum(len(f) for _, _, f in os.walk(tree))
    start = time.perf_counter()
    budget = DiskBudget([tree], budget_mb=1)  # one usage() walk
    walk = time.perf_counter() - start
    print(f"disk budget check over {files} files: {walk * 1000:.0f} ms "
          f"({walk * 1000 / files * 1000:.1f} us/file), then every {budget.interval_s:.1f} s: "
          f"{walk / budget.interval_s:.0%} of a core")


if __name__ == "__main__":
    main()
