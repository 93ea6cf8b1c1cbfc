// Which runtime this process uses: TORCH_OPENREG_RUNTIME, read once.
//
// Read here rather than passed from Python so that C++-only users (the
// conformance harness's subprocesses, a C++ test) get the same choice; the
// Python package (torch_openreg/_runtime.py) validates the name first and
// names the torch device after it.
#include "runtime/rt/Runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace openreg::rt {

const RuntimeApi& api() {
  static const RuntimeApi& chosen = []() -> const RuntimeApi& {
    const char* name = std::getenv("TORCH_OPENREG_RUNTIME");
    if (name == nullptr || *name == '\0' || std::strcmp(name, "openreg") == 0) {
      return openreg_runtime();
    }
    if (std::strcmp(name, "shmreg") == 0) {
      return shmreg_runtime();
    }
    // No error channel exists this early (device_count() must not throw), and
    // silently using another runtime than asked would make results lie.
    std::fprintf(stderr, "torch_openreg: unknown TORCH_OPENREG_RUNTIME=%s (openreg, shmreg)\n", name);
    std::abort();
  }();
  return chosen;
}

}  // namespace openreg::rt
