#include "aten/native/Launch.h"

#include "aten/native/KernelConfig.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>

namespace openreg::native {
namespace {

void run_body(void* user_data) {
  std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()>*>(user_data));
  // Nothing may escape the worker thread: all argument checks happen on the
  // host before launch, so reaching this is a bug in a kernel.
  try {
    (*body)();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_openreg: native kernel failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "torch_openreg: native kernel failed with a non-standard exception\n");
  }
}

} // namespace

void launch_kernel(c10::DeviceIndex device, std::function<void()> body) {
  orStream_t stream = openreg::getCurrentRawStream(device);
  auto* heap_body = new std::function<void()>(std::move(body));
  orError_t err = orLaunchKernel(stream, &run_body, heap_body);
  if (err != orSuccess) {
    delete heap_body;
    OPENREG_CHECK(err);
  }
  count_native_launch();
}

void parallel_range(int64_t n, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) {
    return;
  }
  if (n < 2 * grain) {
    fn(0, n);
    return;
  }
  // The second half is offered to an inter-op pool thread. Whoever claims it
  // first runs it: on a loaded machine the pool thread may not be scheduled
  // soon, and then the kernel thread does the work itself instead of waiting.
  // The helper touches `fn` only after winning the claim, and the caller waits
  // for a helper that won, so `fn` outlives every use.
  struct Shared {
    std::atomic<bool> claimed{false};
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  const int64_t half = n / 2;
  const auto* body = &fn;
  at::launch([shared, body, half, n] {
    if (shared->claimed.exchange(true)) {
      return;
    }
    try {
      (*body)(half, n);
    } catch (...) {
      shared->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->done = true;
    shared->done_cv.notify_one();
  });
  fn(0, half);
  if (!shared->claimed.exchange(true)) {
    fn(half, n);
    return;
  }
  std::unique_lock<std::mutex> lock(shared->mutex);
  shared->done_cv.wait(lock, [&] { return shared->done; });
  if (shared->error) {
    std::rethrow_exception(shared->error);
  }
}

} // namespace openreg::native
