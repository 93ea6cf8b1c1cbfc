"""Time from `ootci run` to verdict, cold and warm, with each step's share.

cold: a fresh OOTCI_HOME (no environment, no build dir, no ccache cache).
warm: the same home again (environment and build dir reused; ccache if installed).

    python benchmarks/time_to_verdict.py [--torch pip:torch==2.13.0] [--backend backend]

Targets: issue #3, warm <= 60 s and cold <= 5 min; issue #19, on torch 2.13.0 from the
local wheel (the default spec, found through pip's find-links) and a quiet machine, cold
<= 90 s and warm <= 25 s. The 2-core reference machine; the load average is printed, and for each run the CPU
work it took and the least wall time that work can take on this machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_meter import CpuMeter, CpuUse  # noqa: E402


def timed_run(home: Path, torch: str, backend: Path) -> tuple[float, dict[str, object], CpuUse]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    env["OOTCI_HOME"] = str(home)
    env["CCACHE_DIR"] = str(home / "ccache")
    start = time.perf_counter()
    with CpuMeter() as meter:
        proc = subprocess.run(
            [sys.executable, "-m", "service.cli", "run", "--torch", torch, "--backend", str(backend), "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True,
        )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"ootci run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (result,) = json.loads(proc.stdout)  # a list of runs, one per torch spec
    return elapsed, result, meter.use


def shares(total: float, result: dict[str, object]) -> str:
    steps = result["steps"]
    assert isinstance(steps, list)
    parts = [f"{s['name']} {s['duration_s']:.1f}s ({100 * s['duration_s'] / total:.0f}%)" for s in steps]
    accounted = sum(s["duration_s"] for s in steps)
    parts.append(f"overhead {total - accounted:.1f}s ({100 * (total - accounted) / total:.0f}%)")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="pip:torch==2.13.0")
    parser.add_argument("--backend", type=Path, default=ROOT / "backend")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ootci-ttv-") as tmp:
        home = Path(tmp)
        cold, cold_result, cold_cpu = timed_run(home, args.torch, args.backend.resolve())
        warm, warm_result, warm_cpu = timed_run(home, args.torch, args.backend.resolve())
    print(f"torch spec: {args.torch}; verdicts: cold={cold_result['state']} warm={warm_result['state']}")
    print(f"cold: {cold:7.1f} s  (targets <= 300 s, #19: <= 90 s)  {shares(cold, cold_result)}")
    print(f"warm: {warm:7.1f} s  (targets <=  60 s, #19: <= 25 s)  {shares(warm, warm_result)}")
    print(f"cold CPU: {cold_cpu.line()}")
    print(f"warm CPU: {warm_cpu.line()}")
    print(f"warm/cold ratio: {warm / cold:.2f}")
    print(f"load average (1, 5 min): {os.getloadavg()[0]:.2f}, {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
