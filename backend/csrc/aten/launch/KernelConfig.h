#pragma once

// Process-wide switch between the native kernels and the CPU fallback, and the
// counters tests and the benchmark use to see which path an op really took.

#include <cstdint>

namespace openreg::native {

// Initially taken from OPENREG_NATIVE_KERNELS (unset or anything but "0" = on).
bool native_kernels_enabled();
void set_native_kernels_enabled(bool enabled);

struct KernelCounters {
  uint64_t native_launches = 0;  // kernels enqueued with rtLaunchKernel by this directory
  uint64_t cpu_fallbacks = 0;    // ops this directory routed to at::native::cpu_fallback
};

KernelCounters kernel_counters();
void reset_kernel_counters();
void count_native_launch();
void count_cpu_fallback();

} // namespace openreg::native
