#include "aten/launch/KernelConfig.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace openreg::native {
namespace {

bool enabled_from_env() {
  const char* value = std::getenv("OPENREG_NATIVE_KERNELS");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// Function-local statics: kernels registered from other translation units may
// run during static initialisation of the library.
std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag{enabled_from_env()};
  return flag;
}

std::atomic<uint64_t> native_launches{0};
std::atomic<uint64_t> cpu_fallbacks{0};

} // namespace

bool native_kernels_enabled() {
  return enabled_flag().load(std::memory_order_relaxed);
}

void set_native_kernels_enabled(bool enabled) {
  enabled_flag().store(enabled, std::memory_order_relaxed);
}

KernelCounters kernel_counters() {
  return {native_launches.load(), cpu_fallbacks.load()};
}

void reset_kernel_counters() {
  native_launches.store(0);
  cpu_fallbacks.store(0);
}

void count_native_launch() {
  native_launches.fetch_add(1, std::memory_order_relaxed);
}

void count_cpu_fallback() {
  cpu_fallbacks.fetch_add(1, std::memory_order_relaxed);
}

} // namespace openreg::native
