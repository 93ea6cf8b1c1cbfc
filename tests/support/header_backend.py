"""A vendor-style backend whose build compiles one C++ file against the installed torch's
headers (``torch/include``), with the real compiler: a header that changes between two
torch builds breaks it the way an upstream change breaks a real backend, in seconds."""

from __future__ import annotations

from pathlib import Path

RECIPE = """\
[backend]
name = "{name}"

[build]
command = ["{{python}}", "build.py"]

[test]
command = ["{{python}}", "-m", "pytest", "tests", "-p", "no:cacheprovider", "--junitxml={{junit}}"]
timeout_per_test = 60
"""

BUILD = """\
import pathlib, subprocess, sys
import torch
include = pathlib.Path(torch.__file__).parent / "include"
cmd = ["c++", "-std=c++17", "-fsyntax-only", "-I", str(include), "csrc/allocator.cpp"]
print(" ".join(cmd), flush=True)
sys.exit(subprocess.run(cmd).returncode)
"""

SOURCE = """\
#include <c10/core/Allocator.h>

namespace vendor {
// The backend's allocator overrides what c10::Allocator declares; when upstream changes
// that declaration, this stops compiling.
struct VendorAllocator final : c10::Allocator {
  c10::DataPtr allocate(std::size_t n) override { return c10::DataPtr{n}; }
};
}  // namespace vendor
"""

TESTS = """\
def test_the_build_produced_nothing_to_import_and_that_is_fine():
    assert True
"""

# Two versions of the header the backend compiles against: green, and upstream's change
# (allocate becomes const, as in pytorch/pytorch#120969).
ALLOCATOR_H = """\
#pragma once
#include <cstddef>
namespace c10 {
struct DataPtr { std::size_t size; };
struct Allocator {
  virtual ~Allocator() = default;
  virtual DataPtr allocate(std::size_t n) = 0;
};
}  // namespace c10
"""
ALLOCATOR_H_CONST = ALLOCATOR_H.replace(
    "virtual DataPtr allocate(std::size_t n) = 0;", "virtual DataPtr allocate(std::size_t n) const = 0;"
)


def write_header_backend(root: Path, name: str = "vendor_hdr") -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "ootci.toml").write_text(RECIPE.format(name=name))
    (root / "build.py").write_text(BUILD)
    (root / "csrc" / "allocator.cpp").write_text(SOURCE)
    (root / "tests" / "test_smoke.py").write_text(TESTS)
    return root
