#include "runtime/OpenRegLaunch.h"

#include <exception>
#include <memory>

#include <c10/util/Exception.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg {

namespace {
void run_owned(void* user_data) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(user_data));
  try {
    (*fn)();
  } catch (const std::exception& e) {
    TORCH_WARN("openreg: exception in an asynchronous kernel: ", e.what());
  }
}
} // namespace

void launch_kernel(rtStream_t stream, std::function<void()> fn) {
  auto owned = std::make_unique<std::function<void()>>(std::move(fn));
  OPENREG_CHECK(rtLaunchKernel(stream, &run_owned, owned.get()));
  owned.release(); // the worker thread deletes it after running it
}

void launch_kernel_and_wait(c10::DeviceIndex device, const std::function<void()>& fn) {
  const rtStream_t stream = getCurrentRawStream(device);
  std::exception_ptr error;
  launch_kernel(stream, [&fn, &error] {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  OPENREG_CHECK(rtStreamSynchronize(stream));
  if (error) {
    std::rethrow_exception(error);
  }
}

} // namespace openreg
