#include "aten/launch/Launch.h"

#include "aten/launch/ChunkHelper.h"
#include "aten/launch/KernelConfig.h"
#include "aten/launch/Spin.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>

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
  rtStream_t stream = openreg::getCurrentRawStream(device);
  auto* heap_body = new std::function<void()>(std::move(body));
  rtError_t err = rtLaunchKernel(stream, &run_body, heap_body);
  if (err != rtSuccess) {
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
  // claim one at a time: the kernel thread from the front, the helper from
  // the back. The kernel thread starts at once; the helper joins when it
  // picks the job up. With two fixed halves, a helper that started late
  // (tens of microseconds when it has to be woken on a virtual machine) made
  // the kernel thread wait for the whole second half; with chunks it waits
  // for at most the one chunk the helper is running. Claiming from opposite
  // ends keeps each thread on the same part of the data from one kernel to
  // the next, so a tensor that fits in the two cores' caches stays there.
  //
  // Lifetime: the helper touches `fn` only after moving the state from Idle to
  // Running; the caller, once out of chunks, either moves Idle to Closed (the
  // helper will never touch `fn`) or waits for Done. So `fn` outlives every use.
  enum State : int { Idle, Running, Done, Closed };
  struct Shared {
    // Unclaimed chunks are [front, back): front in the high half, back in the low.
    std::atomic<uint32_t> unclaimed{0};
    std::atomic<int> state{Idle};
    std::mutex mutex;
    std::condition_variable done_cv;
    std::exception_ptr error;

    std::optional<int64_t> claim(bool from_front) {
      uint32_t bounds = unclaimed.load(std::memory_order_relaxed);
      for (;;) {
        const uint32_t front = bounds >> 16, back = bounds & 0xffff;
        if (front >= back) return std::nullopt;
        const uint32_t next = from_front ? (front + 1) << 16 | back : front << 16 | (back - 1);
        if (unclaimed.compare_exchange_weak(bounds, next, std::memory_order_relaxed)) {
          return from_front ? front : back - 1;
        }
      }
    }
  };
  static_assert(kMaxChunks < (1 << 16), "chunk indices are packed in 16 bits");
  const int64_t chunks = std::min<int64_t>(kMaxChunks, n / grain);
  const int64_t chunk = (n + chunks - 1) / chunks;
  auto run_chunks = [chunk, n](Shared& shared, bool from_front,
                               const std::function<void(int64_t, int64_t)>& body) {
    while (auto index = shared.claim(from_front)) {
      const int64_t begin = *index * chunk;
      if (begin < n) body(begin, std::min(n, begin + chunk));
    }
  };
  auto shared = std::make_shared<Shared>();
  shared->unclaimed = static_cast<uint32_t>(chunks);
  const auto* body = &fn;
  offer_to_chunk_helper([shared, body, run_chunks] {
    int expected = Idle;
    if (!shared->state.compare_exchange_strong(expected, Running)) {
      return;
    }
    try {
      run_chunks(*shared, /*from_front=*/false, *body);
    } catch (...) {
      shared->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->state = Done;
    shared->done_cv.notify_one();
  });
  std::exception_ptr caller_error;
  try {
    run_chunks(*shared, /*from_front=*/true, fn);
  } catch (...) {
    // Stop handing out chunks, but still wait for a running helper below.
    shared->unclaimed = 0;
    caller_error = std::current_exception();
  }
  int expected = Idle;
  if (!shared->state.compare_exchange_strong(expected, Closed) &&
      !spin_until([&] { return shared->state.load() == Done; })) {
    // The helper is still in its last chunk.
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

extern "C" int openreg_launch_host_kernel(void (*fn)(void*), void* data) noexcept {
  try {
    openreg::native::launch_kernel(openreg::current_device(), [fn, data] { fn(data); });
    return 0;
  } catch (...) {
    return 1;
  }
}
