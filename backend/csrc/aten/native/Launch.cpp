#include "aten/native/Launch.h"

#include "aten/native/ChunkHelper.h"
#include "aten/native/KernelConfig.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

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
  // [0, n) is cut into chunks that the kernel thread and the chunk helper
  // claim one at a time. The kernel thread starts at once; the helper joins
  // when it picks the job up. With two fixed halves, a helper that started
  // late (tens of microseconds when it has to be woken on a virtual machine)
  // made the kernel thread wait for the whole second half; with chunks it
  // waits for at most the one chunk the helper is running.
  //
  // Lifetime: the helper touches `fn` only after moving the state from Idle to
  // Running; the caller, once out of chunks, either moves Idle to Closed (the
  // helper will never touch `fn`) or waits for Done. So `fn` outlives every use.
  enum State : int { Idle, Running, Done, Closed };
  struct Shared {
    std::atomic<int64_t> next{0};
    std::atomic<int> state{Idle};
    std::mutex mutex;
    std::condition_variable done_cv;
    std::exception_ptr error;
  };
  const int64_t chunks = std::min<int64_t>(kMaxChunks, n / grain);
  const int64_t chunk = (n + chunks - 1) / chunks;
  auto run_chunks = [chunk, n](Shared& shared, const std::function<void(int64_t, int64_t)>& body) {
    for (int64_t begin = shared.next.fetch_add(chunk); begin < n; begin = shared.next.fetch_add(chunk)) {
      body(begin, std::min(n, begin + chunk));
    }
  };
  auto shared = std::make_shared<Shared>();
  const auto* body = &fn;
  offer_to_chunk_helper([shared, body, run_chunks] {
    int expected = Idle;
    if (!shared->state.compare_exchange_strong(expected, Running)) {
      return;
    }
    try {
      run_chunks(*shared, *body);
    } catch (...) {
      shared->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->state = Done;
    shared->done_cv.notify_one();
  });
  std::exception_ptr caller_error;
  try {
    run_chunks(*shared, fn);
  } catch (...) {
    // Stop handing out chunks, but still wait for a running helper below.
    shared->next = n;
    caller_error = std::current_exception();
  }
  int expected = Idle;
  if (!shared->state.compare_exchange_strong(expected, Closed)) {
    std::unique_lock<std::mutex> lock(shared->mutex);
    shared->done_cv.wait(lock, [&] { return shared->state == Done; });
  }
  if (caller_error) {
    std::rethrow_exception(caller_error);
  }
  if (shared->error) {
    std::rethrow_exception(shared->error);
  }
}

} // namespace openreg::native
