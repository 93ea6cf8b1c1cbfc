#include "aten/native/Launch.h"

#include "aten/native/KernelConfig.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

#include <ATen/Parallel.h>

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
  if (n < 2 * grain || at::get_num_interop_threads() < 1) {
    fn(0, n);
    return;
  }
  const int64_t half = n / 2;
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr helper_error;
  at::launch([&] {
    try {
      fn(half, n);
    } catch (...) {
      helper_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    done_cv.notify_one();
  });
  fn(0, half);
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done; });
  if (helper_error) {
    std::rethrow_exception(helper_error);
  }
}

} // namespace openreg::native
