// Enqueue host code as a "kernel" on an openreg stream.
//
// Device memory is only accessible while a kernel runs (the runtime keeps it
// PROT_NONE otherwise), so every piece of host code that must read or write
// device memory goes through here.
#pragma once

#include <functional>

#include <c10/core/Device.h>

#include "runtime/rt/Runtime.h"

namespace openreg {

// Runs `fn` on the worker thread of `stream`, ordered after earlier work on it.
// Returns immediately. `fn` owns what it captures (capture tensors by value to
// keep their storage alive until the kernel ran). An exception escaping `fn`
// cannot reach the caller any more; it is reported with TORCH_WARN.
void launch_kernel(rtStream_t stream, std::function<void()> fn);

// launch_kernel on the current stream of `device`, then wait for that stream:
// for the few places whose result the host needs right away. Exceptions from
// `fn` are rethrown here.
void launch_kernel_and_wait(c10::DeviceIndex device, const std::function<void()>& fn);

} // namespace openreg
