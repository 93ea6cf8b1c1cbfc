"""Build torch_openreg with CMake + Ninja against the torch of the running interpreter.

`pip install --no-build-isolation .` (or `-e .`) runs this with the environment's
torch; the libraries land next to the package (`torch_openreg/_C*.so`,
`torch_openreg/lib/`), in the source tree for editable installs.

Env: OPENREG_BUILD_DIR (CMake build dir, default build/<torch version>),
CMAKE_BUILD_DIR (same, as ootci sets it), OPENREG_BUILD_TYPE (Release),
MAX_JOBS (ninja -j, default 2: the build machines are shared),
OPENREG_CMAKE_ARGS (extra configure options, shell-quoted, e.g.
"-DOPENREG_UNITY=OFF -DOPENREG_PCH=OFF").
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _torch_info() -> dict[str, str]:
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit(
            "torch_openreg builds against the installed torch; install torch first and "
            "use `pip install --no-build-isolation`"
        ) from exc
    return {
        "version": torch.__version__,
        "include": ";".join(cpp_extension.include_paths()),
        "lib": ";".join(cpp_extension.library_paths()),
        "abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
    }


def _build_dir(torch_version: str) -> Path:
    configured = os.environ.get("OPENREG_BUILD_DIR") or os.environ.get("CMAKE_BUILD_DIR")
    if configured:
        return Path(configured).resolve()
    return ROOT / "build" / torch_version.replace("+", "_")


class CMakeBuild(build_ext):
    def run(self) -> None:
        info = _torch_info()
        # Printed first so that a failing build log always names the torch it used.
        print(f"torch_openreg: building against torch {info['version']}", flush=True)
        ext = self.extensions[0]
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = _build_dir(info["version"])
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake",
            "-S", str(ROOT),
            "-B", str(build_dir),
            "-G", "Ninja",
            f"-DCMAKE_BUILD_TYPE={os.environ.get('OPENREG_BUILD_TYPE', 'Release')}",
            f"-DOPENREG_OUTPUT_DIR={package_dir}",
            f"-DTORCH_VERSION={info['version']}",
            f"-DTORCH_INCLUDE_DIRS={info['include']}",
            f"-DTORCH_LIBRARY_DIRS={info['lib']}",
            f"-DTORCH_CXX11_ABI={info['abi']}",
            # The interpreter whose torchgen generates the registration.
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DOPENREG_PYTHON_INCLUDE_DIR={sysconfig.get_paths()['include']}",
            f"-DOPENREG_PYTHON_EXT_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
        ]
        if shutil.which("ccache"):
            configure += [
                "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
                "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
            ]
        configure += shlex.split(os.environ.get("OPENREG_CMAKE_ARGS", ""))
        jobs = os.environ.get("MAX_JOBS", "2")
        try:
            subprocess.run(configure, check=True)
            subprocess.run(["cmake", "--build", str(build_dir), "--", f"-j{jobs}"], check=True)
        except subprocess.CalledProcessError as exc:
            raise SystemExit(
                f"torch_openreg: build failed against torch {info['version']} "
                f"(build dir {build_dir}): {exc}"
            ) from exc


setup(
    ext_modules=[Extension("torch_openreg._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
