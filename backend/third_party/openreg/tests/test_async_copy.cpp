// orMemcpyAsync / orMemsetAsync: stream ordering and the pageable vs pinned rules.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "check.h"

using namespace std::chrono_literals;

namespace {

struct Latch {
  std::atomic<bool> open{false};
  static void wait_fn(void* p) {
    while (!static_cast<Latch*>(p)->open.load()) std::this_thread::sleep_for(100us);
  }
};

}  // namespace

OR_TEST(h2d_from_pageable_memory_is_staged_before_returning) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  Latch latch;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &latch));
  std::vector<unsigned char> src(4096, 0x11);
  CHECK_OK(orMemcpyAsync(d, src.data(), src.size(), orMemcpyHostToDevice, s));
  std::fill(src.begin(), src.end(), 0x22);  // the caller reuses its buffer at once
  latch.open = true;
  CHECK_OK(orStreamSynchronize(s));
  std::vector<unsigned char> back(4096);
  CHECK_OK(orMemcpy(back.data(), d, back.size(), orMemcpyDeviceToHost));
  CHECK_EQ(static_cast<int>(back[0]), 0x11);
  CHECK_EQ(static_cast<int>(back[4095]), 0x11);
  CHECK_OK(orFree(d));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(d2h_into_pageable_memory_is_complete_on_return) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  CHECK_OK(orMemsetAsync(d, 0x33, 4096, s));
  // Give the stream something slow to do first so "done" is not an accident.
  CHECK_OK(orLaunchHostFunc(s, [](void*) { std::this_thread::sleep_for(20ms); }, nullptr));
  std::vector<unsigned char> dst(4096, 0);
  CHECK_OK(orMemcpyAsync(dst.data(), d, dst.size(), orMemcpyDeviceToHost, s));
  CHECK_EQ(static_cast<int>(dst[0]), 0x33);
  CHECK_EQ(static_cast<int>(dst[4095]), 0x33);
  CHECK_OK(orFree(d));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(copies_with_pinned_memory_are_truly_asynchronous) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  void* d = nullptr;
  unsigned char* pinned = nullptr;
  CHECK_OK(orMalloc(&d, 4096));
  CHECK_OK(orMallocHost(reinterpret_cast<void**>(&pinned), 4096));
  std::memset(pinned, 0x44, 4096);
  Latch latch;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &latch));
  // Both return while the stream is still blocked: nothing was staged or waited for.
  CHECK_OK(orMemcpyAsync(d, pinned, 4096, orMemcpyHostToDevice, s));
  CHECK_OK(orMemsetAsync(d, 0x55, 16, s));
  CHECK_OK(orMemcpyAsync(pinned, d, 4096, orMemcpyDefault, s));
  CHECK_ERR(orStreamQuery(s), orErrorNotReady);
  CHECK_EQ(static_cast<int>(pinned[0]), 0x44);
  latch.open = true;
  CHECK_OK(orStreamSynchronize(s));
  CHECK_EQ(static_cast<int>(pinned[0]), 0x55);
  CHECK_EQ(static_cast<int>(pinned[15]), 0x55);
  CHECK_EQ(static_cast<int>(pinned[16]), 0x44);
  CHECK_OK(orFreeHost(pinned));
  CHECK_OK(orFree(d));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(sync_memcpy_waits_for_the_default_stream_only) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 64));
  CHECK_OK(orMemset(d, 0, 64));
  // Work queued on the default stream is finished before orMemcpy reads.
  CHECK_OK(orLaunchHostFunc(nullptr, [](void*) { std::this_thread::sleep_for(20ms); }, nullptr));
  CHECK_OK(orMemsetAsync(d, 0x66, 64, nullptr));
  unsigned char back[64] = {};
  CHECK_OK(orMemcpy(back, d, sizeof back, orMemcpyDeviceToHost));
  CHECK_EQ(static_cast<int>(back[63]), 0x66);

  // A blocked side stream does not hold orMemcpy back.
  orStream_t side = nullptr;
  CHECK_OK(orStreamCreate(&side));
  Latch latch;
  CHECK_OK(orLaunchHostFunc(side, &Latch::wait_fn, &latch));
  CHECK_OK(orMemcpy(back, d, sizeof back, orMemcpyDeviceToHost));
  CHECK_ERR(orStreamQuery(side), orErrorNotReady);
  latch.open = true;
  CHECK_OK(orStreamSynchronize(side));  // the latch lives on this stack frame
  CHECK_OK(orStreamDestroy(side));
  CHECK_OK(orFree(d));
}

OR_TEST(async_errors_are_checked_before_enqueueing) {
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, 64));
  char host[128];
  CHECK_ERR(orMemcpyAsync(d, host, 65, orMemcpyHostToDevice, nullptr), orErrorInvalidValue);
  CHECK_ERR(orMemcpyAsync(host, d, 8, orMemcpyHostToDevice, nullptr),
            orErrorInvalidMemcpyDirection);
  CHECK_ERR(orMemsetAsync(host, 0, 8, nullptr), orErrorInvalidValue);
  CHECK_ERR(orMemcpyAsync(d, host, 8, orMemcpyHostToDevice, reinterpret_cast<orStream_t>(host)),
            orErrorInvalidResourceHandle);
  CHECK_OK(orFree(d));
}

OR_TEST_MAIN()
