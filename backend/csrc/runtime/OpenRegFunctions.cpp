#include "runtime/OpenRegFunctions.h"

#include <atomic>
#include <mutex>

#include <pthread.h>

namespace openreg {

namespace {
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_in_bad_fork{false};

void mark_child_after_fork() {
  g_in_bad_fork.store(true);
}

constexpr const char* kBadForkMessage =
    "Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with "
    "multiprocessing, you must use the 'spawn' start method";
} // namespace

namespace detail {
void raise_runtime_error(rtError_t err, const char* expr) {
  TORCH_CHECK(!g_in_bad_fork.load(), kBadForkMessage, " (", rtGetErrorString(err), ")");
  // Named after the runtime: "shmreg error (...)" must not read as openreg's.
  TORCH_CHECK(false, rt::api().name, " error (", rtGetErrorName(err), "): ", rtGetErrorString(err),
              " [", expr, "]");
}
} // namespace detail

c10::DeviceIndex device_count() noexcept {
  // The runtime reads OPENREG_DEVICE_COUNT once; cache it as CUDA does.
  static const c10::DeviceIndex count = [] {
    int n = 0;
    if (rtGetDeviceCount(&n) != rtSuccess) {
      return c10::DeviceIndex{0};
    }
    return static_cast<c10::DeviceIndex>(n);
  }();
  return count;
}

void check_device_index(c10::DeviceIndex device) {
  const auto count = device_count();
  // RuntimeError with the wording torch.accelerator documents for every
  // backend (CUDA raises a RuntimeError here too, not an IndexError).
  TORCH_CHECK(
      device >= 0 && device < count,
      "The device index is out of range. It must be in [0, ", static_cast<int>(count),
      "), but got ", static_cast<int>(device), " (openreg)");
}

c10::DeviceIndex current_device() {
  int device = 0;
  OPENREG_CHECK(rtGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void set_device(c10::DeviceIndex device) {
  check_device_index(device);
  OPENREG_CHECK(rtSetDevice(device));
}

c10::DeviceIndex exchange_device(c10::DeviceIndex device) {
  const auto previous = current_device();
  if (device >= 0 && device != previous) {
    set_device(device);
  }
  return previous;
}

c10::DeviceIndex maybe_exchange_device(c10::DeviceIndex device) {
  return exchange_device(device);
}

void lazy_init() {
  TORCH_CHECK(!g_in_bad_fork.load(), kBadForkMessage);
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, &mark_child_after_fork);
    g_initialized.store(true);
  });
}

bool is_initialized() noexcept {
  return g_initialized.load();
}

bool is_in_bad_fork() noexcept {
  return g_in_bad_fork.load();
}

} // namespace openreg
