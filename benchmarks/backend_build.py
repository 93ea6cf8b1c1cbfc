"""Build times of the torch_openreg backend: cold, no-op and one-file rebuilds.

Configures and builds the backend with CMake + Ninja into a fresh temporary
build directory (never the developer's build dir), against the torch of the
running interpreter, exactly as backend/setup.py does. Prints one line per
measurement; all three come from the same run on the same machine.

    flock /tmp/openreg-build.lock .venv/bin/python benchmarks/backend_build.py [--jobs 2] [--keep]

Targets (2-core machine): cold <= 90 s, no-op <= 2 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

BACKEND = Path(__file__).resolve().parent.parent / "backend"
# A file of the integration layer that most edits resemble: a .cpp with
# torch headers, compiled once and relinked into libtorch_openreg.
TOUCHED = BACKEND / "csrc" / "runtime" / "OpenRegGuard.cpp"


def configure_command(build_dir: Path, out_dir: Path, extra: list[str]) -> list[str]:
    import torch
    from torch.utils import cpp_extension

    return [
        "cmake", "-S", str(BACKEND), "-B", str(build_dir), "-G", "Ninja",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temp build dir")
    parser.add_argument("cmake_args", nargs="*", help="extra -D options for the configure step")
    args = parser.parse_args()

    env_ccache = shutil.which("ccache")
    tmp = Path(tempfile.mkdtemp(prefix="openreg-build-bench-"))
    build_dir, out_dir = tmp / "build", tmp / "pkg"
    build = ["cmake", "--build", str(build_dir), "--", f"-j{args.jobs}"]
    try:
        # ccache would turn "cold" into "warm": measure the compiler itself.
        configure = timed(configure_command(build_dir, out_dir, args.cmake_args))
        cold = timed(build)
        noop = timed(build)
        os.utime(TOUCHED)  # a touch is what an edit looks like to ninja
        one_file = timed(build)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    import torch

    load = os.getloadavg()[0]
    print(f"torch {torch.__version__}, -j{args.jobs}, ccache on PATH: {bool(env_ccache)} (not used), "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'':18}{'wall s':>8}{'cpu s':>8}{'cpu/jobs':>10}")
    for name, (wall, cpu), note in [
        ("configure", configure, ""),
        ("cold build", cold, "target <= 90 s"),
        ("no-op rebuild", noop, "target <= 2 s"),
        ("one-file rebuild", one_file, str(TOUCHED.relative_to(BACKEND))),
    ]:
        print(f"{name:18}{wall:8.2f}{cpu:8.2f}{cpu / args.jobs:10.2f}   {note}")


if __name__ == "__main__":
    main()
