#pragma once

// Bounded spinning before a blocking wait. On a virtual machine a thread
// woken through a futex takes tens of microseconds to run again, as long as a
// whole large kernel; the threads of the emulated device poll for a short
// while first, as OpenMP's do after each parallel region.

#include <chrono>
#include <thread>

namespace openreg::native {

// Long enough to bridge the gap between two queued kernels or to wait out a
// chunk on the other thread, short enough that an idle device soon stops
// burning a core.
constexpr auto kSpin = std::chrono::microseconds(50);

// Polls ready() for up to kSpin, yielding the core between polls so that a
// runnable thread sharing it is not held up. Returns whether it became true.
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

} // namespace openreg::native
