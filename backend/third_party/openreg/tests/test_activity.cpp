// Activity tracing: the records a profiler reads for kernels, copies, memsets and
// allocations.
#include <chrono>
#include <thread>
#include <vector>

#include "check.h"

namespace {

std::vector<orActivityRecord> read_all() {
  std::vector<orActivityRecord> out(64);
  size_t n = 0;
  unsigned long long dropped = 0;
  CHECK_OK(orActivityRead(out.data(), out.size(), &n, &dropped));
  CHECK_EQ(dropped, 0ull);
  out.resize(n);
  return out;
}

void sleep_kernel(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

OR_TEST(nothing_is_recorded_while_disabled) {
  CHECK_OK(orActivityEnable(0));
  void* p = nullptr;
  CHECK_OK(orMalloc(&p, 4096));
  CHECK_OK(orMemset(p, 0, 4096));
  CHECK_OK(orFree(p));
  CHECK_EQ(read_all().size(), 0u);
}

OR_TEST(kernel_record_has_stream_times_and_correlation) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  unsigned long long sid = 0;
  CHECK_OK(orStreamGetId(s, &sid));
  CHECK(sid != 0);
  CHECK_OK(orActivityEnable(1));
  const long long before = wall_ns();
  CHECK_OK(orActivityPushCorrelationId(42));
  CHECK_OK(orLaunchKernel(s, &sleep_kernel, nullptr));
  unsigned long long popped = 0;
  CHECK_OK(orActivityPopCorrelationId(&popped));
  CHECK_EQ(popped, 42ull);
  // Submitted after the pop: no owner.
  CHECK_OK(orLaunchKernel(s, &sleep_kernel, nullptr));
  CHECK_OK(orStreamSynchronize(s));
  const long long after = wall_ns();
  auto records = read_all();
  CHECK_EQ(records.size(), 2u);
  if (records.size() == 2) {
    const auto& k = records[0];
    CHECK_EQ(k.kind, orActivityKindKernel);
    CHECK_EQ(k.stream_id, sid);
    CHECK_EQ(k.correlation_id, 42ull);
    // Device time on the host's wall clock, inside the window, and it is the
    // kernel's run time (>= its 5 ms sleep), not the submission's.
    CHECK(k.start_ns >= before && k.end_ns <= after);
    CHECK(k.end_ns - k.start_ns >= 5'000'000);
    // Submitted from this thread before it started.
    CHECK(k.submit_thread != 0);
    CHECK(k.submit_ns >= before && k.submit_ns <= k.start_ns);
    CHECK(records[1].id > k.id);
    CHECK_EQ(records[1].correlation_id, 0ull);
    CHECK(records[1].start_ns >= k.end_ns);  // in stream order
  }
  CHECK_OK(orActivityEnable(0));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(copies_memsets_and_allocations_are_recorded) {
  CHECK_OK(orActivityEnable(1));
  std::vector<char> host(8192, 1);
  void* d = nullptr;
  CHECK_OK(orMalloc(&d, host.size()));
  CHECK_OK(orMemcpy(d, host.data(), host.size(), orMemcpyDefault));
  CHECK_OK(orMemsetAsync(d, 0, 100, nullptr));
  CHECK_OK(orMemcpyAsync(host.data(), d, 1000, orMemcpyDeviceToHost, nullptr));
  CHECK_OK(orFree(d));
  CHECK_OK(orActivityEnable(0));
  auto r = read_all();
  CHECK_EQ(r.size(), 5u);
  if (r.size() == 5) {
    CHECK_EQ(r[0].kind, orActivityKindMalloc);
    CHECK_EQ(r[0].bytes, host.size());
    CHECK_EQ(r[1].kind, orActivityKindMemcpy);
    CHECK_EQ(r[1].copy_kind, orMemcpyHostToDevice);  // resolved from orMemcpyDefault
    CHECK_EQ(r[1].stream_id, 0ull);                   // synchronous
    CHECK_EQ(r[1].submit_thread, 0);                  // nothing was queued
    CHECK_EQ(r[2].kind, orActivityKindMemset);
    CHECK_EQ(r[2].bytes, 100u);
    CHECK(r[2].stream_id != 0);
    CHECK_EQ(r[3].copy_kind, orMemcpyDeviceToHost);
    CHECK_EQ(r[3].bytes, 1000u);
    CHECK_EQ(r[4].kind, orActivityKindFree);
    CHECK_EQ(r[4].bytes, host.size());
  }
}

OR_TEST(enabling_starts_an_empty_window) {
  CHECK_OK(orActivityEnable(1));
  CHECK_OK(orLaunchKernel(nullptr, &sleep_kernel, nullptr));
  CHECK_OK(orDeviceSynchronize());
  CHECK_OK(orActivityEnable(1));  // a new profiler: the old record is not its
  CHECK_EQ(read_all().size(), 0u);
  CHECK_OK(orActivityEnable(0));
}

OR_TEST(bad_arguments_are_rejected) {
  CHECK_EQ(orActivityRead(nullptr, 1, nullptr, nullptr), orErrorInvalidValue);
  size_t n = 0;
  CHECK_EQ(orActivityRead(nullptr, 4, &n, nullptr), orErrorInvalidValue);
  CHECK_EQ(orActivityPopCorrelationId(nullptr), orErrorInvalidValue);  // nothing pushed
  CHECK_EQ(orStreamGetId(nullptr, nullptr), orErrorInvalidValue);
}

OR_TEST_MAIN()
