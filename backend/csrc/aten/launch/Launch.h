#pragma once

// Kernel submission: every native kernel is a host closure run by
// rtLaunchKernel on the worker thread of the current openreg stream, the only
// place where device memory is readable.

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>

namespace openreg::native {

// The body must capture host values only (raw device pointers, sizes, strides,
// scalars), never a Tensor: it runs later on another thread, and dropping the
// last reference there would free device memory from inside a kernel. As with
// CUDA, a tensor freed on the host after the launch is only reused by work
// ordered after this kernel on the same stream.
void launch_kernel(c10::DeviceIndex device, std::function<void()> body);

// Below this many elements a second thread costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

// Chunks of a parallel_range: enough that the two threads end close together.
constexpr int64_t kMaxChunks = 16;

// Inside a kernel: runs fn over [0, n) in chunks of at least `grain`, shared
// between the calling thread and the chunk helper thread, because torch's
// own CPU kernels use both cores and a single-threaded device would lose to
// them on every large op. Chunks may run in any order and concurrently.
void parallel_range(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);

} // namespace openreg::native

// [host-kernel-launcher]
// For kernels compiled outside this library (torch.compile's C++ kernels, see
// torch_openreg/_compile): fn(data) is enqueued on the current stream of the
// current device and runs there, inside the access gate, like a native
// kernel. Returns 0, or 1 when the launch failed, in which case fn was not
// called and data is still the caller's. A plain C entry point, so generated
// code can call it through a function pointer without torch headers.
extern "C" int openreg_launch_host_kernel(void (*fn)(void*), void* data) noexcept;
// [/host-kernel-launcher]
