// Several host threads driving their own streams at once: allocation, async copies,
// kernels, events and cross-stream waits interleaved. Catches races in the runtime
// (run it under -fsanitize=thread too) and checks every result.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "check.h"

namespace {

struct Inc {
  int* data;
  int n;
};

void increment(void* p) {
  auto* a = static_cast<Inc*>(p);
  for (int i = 0; i < a->n; ++i) a->data[i] += 1;
}

}  // namespace

OR_TEST(threads_streams_and_events_interleave_correctly) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 150;
  constexpr int kN = 4096;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &errors] {
      int devices = 1;
      orGetDeviceCount(&devices);
      orSetDevice(t % devices);
      orStream_t s = nullptr, helper = nullptr;
      orEvent_t ev = nullptr;
      int* pinned = nullptr;
      if (orStreamCreate(&s) != orSuccess || orStreamCreate(&helper) != orSuccess ||
          orEventCreate(&ev) != orSuccess ||
          orMallocHost(reinterpret_cast<void**>(&pinned), kN * sizeof(int)) != orSuccess) {
        errors.fetch_add(1);
        return;
      }
      for (int r = 0; r < kRounds; ++r) {
        int* d = nullptr;
        if (orMalloc(reinterpret_cast<void**>(&d), kN * sizeof(int) + 512 * (r % 7)) != orSuccess) {
          errors.fetch_add(1);
          break;
        }
        for (int i = 0; i < kN; ++i) pinned[i] = r + i;
        Inc inc{d, kN};
        orMemcpyAsync(d, pinned, kN * sizeof(int), orMemcpyHostToDevice, s);
        orLaunchKernel(s, &increment, &inc);
        // Second increment on another stream, ordered by an event.
        orEventRecord(ev, s);
        orStreamWaitEvent(helper, ev, 0);
        orLaunchKernel(helper, &increment, &inc);
        orEventRecord(ev, helper);
        orStreamWaitEvent(s, ev, 0);
        orMemcpyAsync(pinned, d, kN * sizeof(int), orMemcpyDeviceToHost, s);
        if (orStreamSynchronize(s) != orSuccess) errors.fetch_add(1);
        for (int i = 0; i < kN; ++i) {
          if (pinned[i] != r + i + 2) {
            errors.fetch_add(1);
            break;
          }
        }
        if (orFree(d) != orSuccess) errors.fetch_add(1);
      }
      orFreeHost(pinned);
      orEventDestroy(ev);
      orStreamDestroy(helper);
      orStreamDestroy(s);
    });
  }
  for (auto& th : threads) th.join();
  CHECK_EQ(errors.load(), 0);
}

OR_TEST_MAIN()
