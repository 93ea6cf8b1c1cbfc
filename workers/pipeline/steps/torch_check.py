"""Which torch a spec gives this machine, and whether a ``find_package(Torch)`` build can
use it: a CUDA torch's ``TorchConfig.cmake`` demands a CUDA toolkit with the libraries its
targets link (cuBLAS, cuFFT, ...), and PyPI's default Linux x86_64 wheel is a CUDA build.

``ootci recipe check --torch SPEC`` asks here before any env is made: a ``pip:`` spec is
resolved by pip exactly as the provision step resolves it (``env/resolve.py``), nothing is
installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from service.domain.torch_spec import SourceKind, TorchSpec
from workers.pipeline.env.resolve import resolve
from workers.pipeline.errors import PipelineError
from workers.pipeline.logs.sink import LogSink

# The CUDA::* targets torch's CMake package links (Caffe2's cuda.cmake) beside cudart.
CUDA_LIBRARIES = ("cudart", "cublas", "cufft", "curand", "cusparse", "cusolver", "nvrtc")
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_PROBE = ("import json, torch; print(json.dumps({'version': torch.__version__, "
          "'cuda': torch.version.cuda, 'file': torch.__file__}))")


@dataclass(frozen=True)
class TorchFacts:
    spec: str
    version: str
    source: str  # the URL or file it comes from, or the interpreter's torch dir
    cuda: bool
    how: str = ""  # the settings it resolved with (pip's index, find-links, constraints)


@dataclass(frozen=True)
class CudaToolkit:
    nvcc: str | None
    missing: tuple[str, ...]  # what a CUDA find_package(Torch) needs and is not there

    @property
    def usable(self) -> bool:
        return self.nvcc is not None and not self.missing


def cuda_toolkit(environ: Mapping[str, str] | None = None) -> CudaToolkit:
    """The machine's CUDA toolkit as CMake's FindCUDAToolkit finds it: nvcc (CUDACXX,
    CUDA_HOME/CUDA_PATH, PATH), its headers and the libraries torch's targets link."""
    environ = os.environ if environ is None else environ  # read, never handed on
    candidates = [environ.get("CUDACXX")]
    candidates += [str(Path(environ[v]) / "bin" / "nvcc") for v in ("CUDA_HOME", "CUDA_PATH")
                   if environ.get(v)]
    candidates += [shutil.which("nvcc", path=environ.get("PATH", os.defpath))]
    nvcc = next((c for c in candidates if c and Path(c).is_file()), None)
    if nvcc is None:
        return CudaToolkit(None, ("nvcc",))
    real = Path(nvcc).resolve()
    head = real.read_bytes()[:4096]
    if head.startswith(b"#!"):  # a wrapper script: follow its exec line
        found = re.search(rb"exec\s+(\S+/nvcc)", head)
        real = Path(found.group(1).decode()).resolve() if found else real
    home = real.parent.parent
    missing = [] if (home / "include" / "cuda_runtime.h").is_file() else ["cuda_runtime.h"]
    libdirs = [home / "lib64", home / "lib", home / "targets" / "x86_64-linux" / "lib"]
    for lib in CUDA_LIBRARIES:
        if not any((d / f"lib{lib}.so").exists() for d in libdirs):
            missing.append(f"lib{lib}.so")
    return CudaToolkit(str(real), tuple(missing))


def is_cuda_torch(version: str, url: str = "") -> bool:
    """A torch wheel built for CUDA: a +cuXXX local version, or (Linux x86_64) PyPI's
    default wheel, which carries no local version and is the CUDA build."""
    local = version.partition("+")[2]
    if local:
        return local.startswith("cu")
    on_pypi = "pythonhosted.org" in url or "pypi.org" in url
    return on_pypi and sys.platform == "linux" and os.uname().machine == "x86_64"


def _probe(pythonpath: str = "") -> dict[str, str]:
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                          text=True, timeout=300)
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return dict(json.loads(line))
    raise PipelineError(f"torch does not import: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")


def torch_facts(spec: TorchSpec, cache_dir: Path) -> TorchFacts:
    """What ``spec`` gives this machine, without making an env (PipelineError: it does not)."""
    if spec.kind in (SourceKind.INSTALLED, SourceKind.PATH):
        probe = _probe(str(Path(spec.location).expanduser().resolve())
                       if spec.kind is SourceKind.PATH else "")
        return TorchFacts(spec.text, probe["version"], str(Path(probe["file"]).parent),
                          bool(probe.get("cuda")), "the interpreter running ootci"
                          if spec.kind is SourceKind.INSTALLED else "PYTHONPATH")
    if spec.kind is SourceKind.RUN:
        raise PipelineError("a run: spec is the wheel that run recorded: see `ootci show RUN`")
    with tempfile.TemporaryDirectory(prefix="ootci-check-") as tmp:
        log_path = Path(tmp) / "resolve.log"
        with LogSink(log_path) as log:
            artifact = resolve(spec, cache_dir, log)
        how = next((line.removeprefix("ootci: pip resolved with ")
                    for line in log_path.read_text(errors="replace").splitlines()
                    if line.startswith("ootci: pip resolved with ")), "")
    return TorchFacts(spec.text, artifact.version, artifact.url,
                      is_cuda_torch(artifact.version, artifact.url), how)
