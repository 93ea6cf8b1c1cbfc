"""Blame on a first night: the corpus's header mutants, each against a fresh home.

Issue #27's acceptance: with no history at all, a torch-only break must end ``upstream``
through the run's isolate step (the same backend built on the unpatched torch), with the
subtype the classifier gives it. Each case is a real ``ootci run`` process on its own
fresh home: a ``path:`` overlay of the installed torch with one mutant applied (and a
version of its own, as a new nightly would have), a small C++ probe backend that
overrides, includes and calls the APIs those mutants change (``-fsyntax-only`` against the
overlay's headers: seconds, not torch_openreg's minutes), and ``OOTCI_PINS`` the
installed torch.

    python -m evals.blame [NAME ...] [--json]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from evals.mutants.catalogue import select
from evals.mutants.mutant import Mutant
from evals.mutants.overlay import build_overlay, installed_torch_dir
from evals.paths import ROOT

# The header mutants this probe's one translation unit is broken by, and the Python API
# change its package's import is broken by.
MUTANTS = ("allocate-const", "allocator-deviceindex-int", "hooks-deviceindex-int",
           "host-allocator-header-moved", "register-hooks-renamed", "scalar-type-helper-removed",
           "device-allocator-new-pure-virtual", "cxx23-required",
           "rename-privateuse1-backend-removed")

RECIPE = """\
[backend]
name = "blame_probe"
[build]
command = ["{python}", "build.py"]
# Another PrivateUse1 backend installed beside ootci (torch_openreg in a dev venv) must not
# autoload into the probe's processes: PrivateUse1 holds one backend per process.
env = { TORCH_DEVICE_BACKEND_AUTOLOAD = "0" }
[test]
command = ["{python}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={junit}"]
env = { TORCH_DEVICE_BACKEND_AUTOLOAD = "0" }
timeout_per_test = 60
"""
BUILD = """\
import pathlib, subprocess, sys
import torch
include = pathlib.Path(torch.__file__).parent / "include"
cmd = ["c++", "-std=c++20", "-fsyntax-only", "-Wno-interference-size", "-I", str(include),
       "csrc/probe.cpp"]
print(" ".join(cmd), flush=True)
sys.exit(subprocess.run(cmd).returncode)
"""
PROBE = """\
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/ScalarType.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

namespace probe {
// What a PrivateUse1 backend overrides, includes and calls: one use per API the corpus's
// header mutants change.
struct ProbeAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, 0));
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {}
};
struct ProbeDeviceAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t n) override {
    return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, 0));
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {}
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id) override {}
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return {};
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {}
  void resetPeakStats(c10::DeviceIndex device) override {}
};
inline c10::DeviceAllocator* device_allocator() { return new ProbeDeviceAllocator(); }
struct ProbeHooks final : at::PrivateUse1HooksInterface {
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override { return false; }
};
inline bool unsigned_float() { return c10::isBarebonesUnsignedType(c10::ScalarType::Float); }
inline auto* register_hooks = &at::RegisterPrivateUse1HooksInterface;
}  // namespace probe
"""
# The Python side: what a backend's package does at import (the suite imports it).
PACKAGE = "import torch\n\ntorch.utils.rename_privateuse1_backend(\"blameprobe\")\n"
SMOKE = "import probe_backend  # noqa: F401\n\n\ndef test_smoke():\n    assert True\n"


@dataclass(frozen=True)
class Case:
    mutant: str
    expected: str  # category/subtype the corpus expects
    verdict: str  # what the run says: verdict/subtype
    isolated: bool  # the run has an isolate step
    reason: str  # the first failure's triage reason, shortened

    @property
    def ok(self) -> bool:
        return self.isolated and self.verdict == self.expected


def write_probe(root: Path) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "ootci.toml").write_text(RECIPE)
    (root / "build.py").write_text(BUILD)
    (root / "csrc" / "probe.cpp").write_text(PROBE)
    (root / "tests" / "probe_backend.py").write_text(PACKAGE)
    (root / "tests" / "test_smoke.py").write_text(SMOKE)
    return root


def _own_version(torch_dir: Path, mutant: str) -> None:
    """A version and git_version of the overlay's own (a new nightly's), written through a
    fresh file: the overlay's files are hard links to the installed torch."""
    path = torch_dir / "version.py"
    text = path.read_text()
    path.unlink()
    version = next(line.split("=", 1)[1].strip().strip("'\"") for line in text.splitlines()
                   if line.startswith("__version__"))
    path.write_text(text.replace(version, f"{version.split('+')[0]}+{mutant}", 1)
                    + f"\ngit_version = '{'d' * 40}'\n")


def run_case(mutant: Mutant, work: Path) -> Case:
    overlay = build_overlay(installed_torch_dir(), work / "overlay", mutant)
    _own_version(overlay.torch_dir, mutant.name)
    probe = write_probe(work / "probe")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OOTCI_")}
    environ.update({"OOTCI_HOME": str(work / "home"), "OOTCI_PINS": '["installed"]',
                    "PYTHONPATH": str(ROOT)})
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", "run", "--torch", overlay.spec, "--backend",
         str(probe), "--json"], env=environ, capture_output=True, text=True, timeout=900)
    expected = f"{mutant.expect.category.value}/{mutant.expect.subtype.value}"
    try:
        (doc,) = json.loads(proc.stdout)
    except ValueError:
        return Case(mutant.name, expected, f"no run document (exit {proc.returncode})", False,
                    proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else "")
    failures = doc.get("failures") or [{}]
    return Case(
        mutant.name, expected, f"{doc.get('verdict')}/{doc.get('verdict_subtype')}",
        "isolate" in [s["name"] for s in doc.get("steps", [])],
        (failures[0].get("triage_reason") or "")[:240])


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    only = [a for a in argv if not a.startswith("--")] or list(MUTANTS)
    cases = []
    for mutant in select(only):
        with tempfile.TemporaryDirectory(prefix=f"blame-{mutant.name}-") as tmp:
            case = run_case(mutant, Path(tmp))
        cases.append(case)
        if not as_json:
            mark = "ok " if case.ok else "BAD"
            print(f"{mark} {case.mutant:32} expected {case.expected:32} got {case.verdict:32} "
                  f"isolate step: {'yes' if case.isolated else 'no'}\n    {case.reason}",
                  flush=True)
    good = sum(c.ok for c in cases)
    if as_json:
        print(json.dumps({"cases": [asdict(c) for c in cases], "ok": good}, indent=2))
    else:
        print(f"{good}/{len(cases)} ended as expected through the isolate step")
    return 0 if good == len(cases) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
