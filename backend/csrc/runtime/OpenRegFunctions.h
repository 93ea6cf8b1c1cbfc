// Device helpers and error checking shared by every part of libtorch_openreg.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include "runtime/rt/Runtime.h"

// Turns a runtime error code into a c10::Error carrying the runtime's own
// message, so Python sees e.g. "openreg error: invalid device ordinal".
// In a forked child of an initialised process the error is the documented
// re-initialisation error, whatever call noticed it first.
#define OPENREG_CHECK(EXPR)                                                  \
  do {                                                                       \
    const rtError_t __or_err = (EXPR);                                       \
    if (C10_UNLIKELY(__or_err != rtSuccess)) {                               \
      ::openreg::detail::raise_runtime_error(__or_err, #EXPR);               \
    }                                                                        \
  } while (0)

// For destructors and deleters, which must not throw.
#define OPENREG_WARN(EXPR)                                                   \
  do {                                                                       \
    const rtError_t __or_err = (EXPR);                                       \
    if (__or_err != rtSuccess) {                                             \
      TORCH_WARN("openreg error (", rtGetErrorName(__or_err), "): ",         \
                 rtGetErrorString(__or_err), " [", #EXPR, "]");              \
    }                                                                        \
  } while (0)

namespace openreg {

namespace detail {
[[noreturn]] void raise_runtime_error(rtError_t err, const char* expr);
} // namespace detail

// Number of devices; 0 when the runtime reports none or fails (never throws,
// as isAvailable()/deviceCount() must not).
c10::DeviceIndex device_count() noexcept;

c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
// Sets `device` and returns the previous one; a negative index is a no-op.
c10::DeviceIndex exchange_device(c10::DeviceIndex device);
// Like exchange_device, but does not switch when `device` is already current.
c10::DeviceIndex maybe_exchange_device(c10::DeviceIndex device);

// TORCH_CHECKs that `device` names an existing device ("index out of range").
void check_device_index(c10::DeviceIndex device);

// Fork poisoning (as CUDA): once the runtime has been initialised in this
// process, a fork()ed child must not use it (its stream worker threads did not
// survive the fork). lazy_init() registers the atfork handler.
void lazy_init();
bool is_initialized() noexcept;
bool is_in_bad_fork() noexcept;

} // namespace openreg
