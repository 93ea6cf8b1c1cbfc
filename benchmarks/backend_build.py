"""Build times of the torch_openreg backend: cold, no-op and one-file rebuilds.

Configures and builds the backend with CMake + Ninja into a fresh temporary
build directory (never the developer's build dir), against the torch of the
running interpreter, exactly as backend/setup.py does. Prints one line per
measurement; all three come from the same run on the same machine.

    flock /tmp/openreg-build.lock .venv/bin/python benchmarks/backend_build.py \
        [--jobs 2] [--keep] [--baseline-ref main [--rounds 3]] [-- -DOPENREG_PCH=OFF ...]

--baseline-ref builds the backend/ of that git ref first, in the same run, and
prints each figure of this tree as a ratio to it. CPU-s are the children's
resource usage (what counts on a shared machine); "floor s" is CPU-s / jobs,
the least wall time that work can take on that many cores. Every compile runs
under /usr/bin/time, so the slowest translation units are listed by CPU-s.

One round's CPU ratio is worth about +-0.06 on a virtual machine whose per-core
speed drifts (the same two trees gave 0.60x and 0.70x in consecutive runs):
--rounds N builds both trees N times, alternating which goes first, prints
every round's cold-build ratio and their median, and the tables of the median
round.

Targets (2-core machine): cold <= 90 s, no-op <= 2 s; cold CPU-s <= 0.6x of
the build before the precompiled-header rework (issue #31).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BACKEND = Path(__file__).resolve().parent.parent / "backend"
# A file of the integration layer that most edits resemble: a .cpp with
# torch headers, compiled once and relinked into libtorch_openreg.
TOUCHED = BACKEND / "csrc" / "runtime" / "OpenRegGuard.cpp"


def configure_command(build_dir: Path, out_dir: Path, extra: list[str],
                      backend: Path = BACKEND) -> list[str]:
    import torch
    from torch.utils import cpp_extension

    return [
        "cmake", "-S", str(backend), "-B", str(build_dir), "-G", "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DOPENREG_OUTPUT_DIR={out_dir}",
        f"-DTORCH_VERSION={torch.__version__}",
        f"-DTORCH_INCLUDE_DIRS={';'.join(cpp_extension.include_paths())}",
        f"-DTORCH_LIBRARY_DIRS={';'.join(cpp_extension.library_paths())}",
        f"-DTORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        f"-DPython_EXECUTABLE={sys.executable}",  # whose torchgen generates the registration
        f"-DOPENREG_PYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
        f"-DOPENREG_PYTHON_EXT_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
        *extra,
    ]


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the build's processes). On a shared machine
    the wall time includes waiting for other jobs; CPU / jobs estimates the
    wall time on an otherwise idle machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


# Runs each compile under /usr/bin/time: its CPU-s per object file, appended to
# $OPENREG_TU_LOG (the launcher's own CPU is counted in the build's, and is tiny).
_TU_LAUNCHER = """#!/bin/sh
exec /usr/bin/time -a -o "$OPENREG_TU_LOG" -f "%U %S %C" "$@"
"""


def tu_cpu(log: Path) -> list[tuple[float, str]]:
    """(CPU-s, object or PCH file) per compile, slowest first."""
    rows = []
    for line in log.read_text().splitlines() if log.exists() else []:
        parts = line.split()
        if len(parts) < 3 or "-o" not in parts:
            continue
        target = parts[parts.index("-o") + 1]
        # <target>.dir/<file>: unity sources are unity_0_cxx.cxx in every target
        rows.append((float(parts[0]) + float(parts[1]), target.split("CMakeFiles/")[-1]))
    return sorted(rows, reverse=True)


def export_ref(ref: str, dest: Path) -> Path:
    """backend/ as committed at `ref`, in dest."""
    repo = BACKEND.parent
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "backend"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "backend"


def snapshot(dest: Path) -> Path:
    """This tree's backend/ copied without build outputs, so that editing the
    worktree during a long run changes nothing in it."""
    skip = {"build", "lib", "__pycache__"}

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = Path(directory) in (BACKEND, BACKEND / "torch_openreg")
        return {n for n in names if (top and n in skip) or n.endswith((".so", ".egg-info"))}

    shutil.copytree(BACKEND, dest / "backend", ignore=ignore)
    return dest / "backend"


@dataclass
class Measured:
    steps: dict[str, tuple[float, float]]  # step -> (wall s, CPU s)
    tus: list[tuple[float, str]]  # cold build: (CPU s, object) slowest first


def measure(backend: Path, tmp: Path, jobs: int, cmake_args: list[str]) -> Measured:
    build_dir, out_dir = tmp / "build", tmp / "pkg"
    tmp.mkdir(parents=True, exist_ok=True)
    launcher = tmp / "tu_time.sh"
    launcher.write_text(_TU_LAUNCHER)
    launcher.chmod(0o755)
    tu_log = tmp / "tu_cpu.log"
    os.environ["OPENREG_TU_LOG"] = str(tu_log)
    build = ["cmake", "--build", str(build_dir), "--", f"-j{jobs}"]
    # ccache would turn "cold" into "warm": measure the compiler itself.
    configure = timed(configure_command(
        build_dir, out_dir, [f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}", *cmake_args], backend))
    cold = timed(build)
    tus = tu_cpu(tu_log)
    noop = timed(build)
    os.utime(backend / TOUCHED.relative_to(BACKEND))  # a touch is what an edit looks like to ninja
    one_file = timed(build)
    return Measured({"configure": configure, "cold build": cold, "no-op rebuild": noop,
                     "one-file rebuild": one_file}, tus)


def cold_ratio(results: dict[str, Measured], baseline: str) -> float:
    """This tree's cold-build CPU-s over the baseline's."""
    return results["this tree"].steps["cold build"][1] / results[baseline].steps["cold build"][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temp build dir")
    parser.add_argument("--baseline-ref", help="git ref whose backend/ is built first, for ratios")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --baseline-ref: build both trees this many times, alternating")
    parser.add_argument("--top", type=int, default=8, help="how many of the slowest TUs to list")
    parser.add_argument("cmake_args", nargs="*", help="extra -D options for the configure step")
    args = parser.parse_args()

    if args.rounds < 1 or (args.rounds > 1 and not args.baseline_ref):
        parser.error("--rounds needs --baseline-ref and a count >= 1")
    env_ccache = shutil.which("ccache")
    tmp = Path(tempfile.mkdtemp(prefix="openreg-build-bench-"))
    rounds: list[dict[str, Measured]] = []
    load_before = os.getloadavg()[0]
    try:
        sources = {"this tree": snapshot(tmp / "this-src")}
        if args.baseline_ref:
            sources = {args.baseline_ref: export_ref(args.baseline_ref, tmp / "baseline-src"),
                       **sources}
        for n in range(args.rounds):
            order = list(sources) if n % 2 == 0 else list(reversed(sources))
            measured = {label: measure(sources[label], tmp / f"round{n}-{i}", args.jobs,
                                       args.cmake_args) for i, label in enumerate(order)}
            rounds.append({label: measured[label] for label in sources})
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    results = rounds[0]
    if args.baseline_ref:
        ratios = [cold_ratio(r, args.baseline_ref) for r in rounds]
        results = rounds[ratios.index(statistics.median_low(ratios))]
        if args.rounds > 1:
            print(f"cold build CPU ratio per round: {' '.join(f'{r:.2f}x' for r in ratios)}; "
                  f"median {statistics.median(ratios):.2f}x (tables below: the median round)")

    import torch

    print(f"torch {torch.__version__}, -j{args.jobs}, ccache on PATH: {bool(env_ccache)} (not used), "
          f"load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after, "
          f"on {os.cpu_count()} cores" + (f"; kept {tmp}" if args.keep else ""))
    base = results.get(args.baseline_ref) if args.baseline_ref else None
    for label, res in results.items():
        print(f"\n{label}:")
        print(f"{'':18}{'wall s':>8}{'cpu s':>8}{'floor s':>9}" + ("   cpu ratio  wall ratio" if base and res is not base else ""))
        for name, note in [("configure", ""), ("cold build", "target <= 90 s"),
                           ("no-op rebuild", "target <= 2 s"),
                           ("one-file rebuild", str(TOUCHED.relative_to(BACKEND)))]:
            wall, cpu = res.steps[name]
            ratio = ""
            if base and res is not base:
                bwall, bcpu = base.steps[name]
                ratio = f"{cpu / bcpu if bcpu else 0:11.2f}x{wall / bwall if bwall else 0:10.2f}x"
            print(f"{name:18}{wall:8.2f}{cpu:8.2f}{cpu / args.jobs:9.2f}{ratio}   {note}")
        print("slowest compiles (CPU-s):")
        for tu_cpu_s, target in res.tus[: args.top]:
            print(f"  {tu_cpu_s:7.1f}  {target}")


if __name__ == "__main__":
    main()
