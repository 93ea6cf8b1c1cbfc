// Streams (ordering, concurrency, priorities, lifetime) and events (ordering, timing).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "check.h"

using namespace std::chrono_literals;

namespace {

// A host function that blocks its stream until released: lets a test observe what
// the stream (and the API) do while work is pending, without timing guesses.
struct Latch {
  std::atomic<bool> open{false};
  std::atomic<bool> entered{false};
  static void wait_fn(void* p) {
    auto* l = static_cast<Latch*>(p);
    l->entered = true;
    while (!l->open.load()) std::this_thread::sleep_for(100us);
  }
  void release() { open = true; }
};

void set_flag(void* p) { static_cast<std::atomic<int>*>(p)->store(1); }

bool eventually(const std::atomic<int>& flag, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (flag.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  return flag.load() != 0;
}

}  // namespace

OR_TEST(priorities_are_clamped_stored_and_reported) {
  int least = 99, greatest = 99;
  CHECK_OK(orDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK_EQ(least, 0);
  CHECK_EQ(greatest, -1);
  orStream_t hi = nullptr, lo = nullptr, clamped = nullptr;
  CHECK_OK(orStreamCreateWithPriority(&hi, orStreamNonBlocking, -1));
  CHECK_OK(orStreamCreateWithPriority(&lo, orStreamDefault, 0));
  CHECK_OK(orStreamCreateWithPriority(&clamped, 0, -7));
  int p = 99;
  CHECK_OK(orStreamGetPriority(hi, &p));
  CHECK_EQ(p, -1);
  CHECK_OK(orStreamGetPriority(lo, &p));
  CHECK_EQ(p, 0);
  CHECK_OK(orStreamGetPriority(clamped, &p));
  CHECK_EQ(p, -1);
  CHECK_OK(orStreamGetPriority(nullptr, &p));
  CHECK_EQ(p, 0);
  orStream_t bad = nullptr;
  CHECK_ERR(orStreamCreateWithPriority(&bad, 0x8, 0), orErrorInvalidValue);
  for (orStream_t s : {hi, lo, clamped}) CHECK_OK(orStreamDestroy(s));
}

OR_TEST(streams_belong_to_the_device_current_at_creation) {
  int n = 0;
  orGetDeviceCount(&n);
  if (n < 2) return;
  CHECK_OK(orSetDevice(1));
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  orStream_t def1 = nullptr;
  CHECK_OK(orDeviceGetDefaultStream(1, &def1));
  CHECK_OK(orSetDevice(0));
  int d = -1;
  CHECK_OK(orStreamGetDevice(s, &d));
  CHECK_EQ(d, 1);
  CHECK_OK(orStreamGetDevice(def1, &d));
  CHECK_EQ(d, 1);
  CHECK_OK(orStreamGetDevice(nullptr, &d));  // NULL = default stream of device 0
  CHECK_EQ(d, 0);
  orStream_t def0 = nullptr;
  CHECK_OK(orDeviceGetDefaultStream(0, &def0));
  CHECK(def0 != def1);
  orStream_t again = nullptr;
  CHECK_OK(orDeviceGetDefaultStream(0, &again));
  CHECK(again == def0);
  CHECK_ERR(orDeviceGetDefaultStream(n, &again), orErrorInvalidDevice);
  CHECK_ERR(orStreamDestroy(def0), orErrorInvalidResourceHandle);  // never destroyed
  CHECK_ERR(orStreamDestroy(nullptr), orErrorInvalidResourceHandle);

  // A kernel runs with its stream's device current.
  static std::atomic<int> seen{-1};
  CHECK_OK(orLaunchHostFunc(s, [](void*) {
    int dev = -1;
    orGetDevice(&dev);
    seen = dev;
  }, nullptr));
  CHECK_OK(orStreamSynchronize(s));
  CHECK_EQ(seen.load(), 1);
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(query_and_synchronize_see_pending_work) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  CHECK_OK(orStreamQuery(s));  // empty stream is idle
  Latch latch;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &latch));
  CHECK_ERR(orStreamQuery(s), orErrorNotReady);
  latch.release();
  CHECK_OK(orStreamSynchronize(s));
  CHECK_OK(orStreamQuery(s));
  CHECK_OK(orStreamDestroy(s));
  CHECK_ERR(orStreamQuery(s), orErrorInvalidResourceHandle);
  CHECK_ERR(orLaunchKernel(s, &set_flag, nullptr), orErrorInvalidResourceHandle);
  CHECK_ERR(orLaunchKernel(nullptr, nullptr, nullptr), orErrorInvalidValue);
}

OR_TEST(different_streams_run_concurrently) {
  orStream_t a = nullptr, b = nullptr;
  CHECK_OK(orStreamCreate(&a));
  CHECK_OK(orStreamCreate(&b));
  Latch latch;  // a is blocked until b's work has run
  std::atomic<int> b_ran{0};
  CHECK_OK(orLaunchHostFunc(a, &Latch::wait_fn, &latch));
  CHECK_OK(orLaunchHostFunc(b, &set_flag, &b_ran));
  CHECK(eventually(b_ran));
  CHECK_ERR(orStreamQuery(a), orErrorNotReady);
  latch.release();
  CHECK_OK(orStreamSynchronize(a));
  CHECK_OK(orStreamDestroy(a));
  CHECK_OK(orStreamDestroy(b));
}

OR_TEST(destroying_a_stream_drains_its_queue) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  Latch latch;
  std::atomic<int> after{0};
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &latch));
  CHECK_OK(orLaunchHostFunc(s, &set_flag, &after));
  CHECK_OK(orStreamDestroy(s));  // returns at once, like cudaStreamDestroy
  CHECK_EQ(after.load(), 0);
  latch.release();
  CHECK(eventually(after));
}

OR_TEST(device_synchronize_waits_for_every_stream_of_the_device) {
  orStream_t a = nullptr, b = nullptr;
  CHECK_OK(orStreamCreate(&a));
  CHECK_OK(orStreamCreate(&b));
  static std::atomic<int> done{0};
  done = 0;
  auto slow = [](void*) {
    std::this_thread::sleep_for(30ms);
    done.fetch_add(1);
  };
  CHECK_OK(orLaunchHostFunc(a, slow, nullptr));
  CHECK_OK(orLaunchHostFunc(b, slow, nullptr));
  CHECK_OK(orLaunchHostFunc(nullptr, slow, nullptr));
  CHECK_OK(orDeviceSynchronize());
  CHECK_EQ(done.load(), 3);
  CHECK_OK(orStreamDestroy(a));
  CHECK_OK(orStreamDestroy(b));
}

OR_TEST(work_cannot_synchronize_its_own_stream) {
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  struct Probe {
    orStream_t self;
    std::atomic<int> stream_sync{-1}, device_sync{-1}, event_sync{-1}, pageable_copy{-1};
    orEvent_t later;
    std::atomic<bool> recorded{false};
  } probe;
  probe.self = s;
  CHECK_OK(orEventCreate(&probe.later));
  // Recorded after the probe, so the probe cannot wait for it either.
  CHECK_OK(orLaunchHostFunc(s, [](void* p) {
    auto* pr = static_cast<Probe*>(p);
    pr->stream_sync = orStreamSynchronize(pr->self);
    pr->device_sync = orDeviceSynchronize();
    while (!pr->recorded.load()) std::this_thread::sleep_for(100us);
    pr->event_sync = orEventSynchronize(pr->later);
    char host[4];
    pr->pageable_copy = orMemcpyAsync(host, host, 0, orMemcpyHostToHost, pr->self);
  }, &probe));
  CHECK_OK(orEventRecord(probe.later, s));
  probe.recorded = true;
  CHECK_OK(orStreamSynchronize(s));
  CHECK_EQ(probe.stream_sync.load(), static_cast<int>(orErrorNotPermitted));
  CHECK_EQ(probe.device_sync.load(), static_cast<int>(orErrorNotPermitted));
  CHECK_EQ(probe.event_sync.load(), static_cast<int>(orErrorNotPermitted));
  CHECK_EQ(probe.pageable_copy.load(), static_cast<int>(orSuccess));  // count 0: nothing to wait for
  CHECK_OK(orEventDestroy(probe.later));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(events_track_recorded_work) {
  orEvent_t e = nullptr;
  CHECK_OK(orEventCreate(&e));
  CHECK_OK(orEventQuery(e));        // never recorded: complete
  CHECK_OK(orEventSynchronize(e));
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  Latch latch;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &latch));
  CHECK_OK(orEventRecord(e, s));
  CHECK_ERR(orEventQuery(e), orErrorNotReady);
  latch.release();
  CHECK_OK(orEventSynchronize(e));
  CHECK_OK(orEventQuery(e));
  // Work after the record does not affect it.
  Latch later;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &later));
  CHECK_OK(orEventQuery(e));
  later.release();
  CHECK_OK(orStreamSynchronize(s));
  CHECK_OK(orEventDestroy(e));
  CHECK_ERR(orEventQuery(e), orErrorInvalidResourceHandle);
  CHECK_ERR(orEventDestroy(e), orErrorInvalidResourceHandle);
  orEvent_t bad = nullptr;
  CHECK_ERR(orEventCreateWithFlags(&bad, 0x40), orErrorInvalidValue);
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(waiters_on_one_stream_each_wake_when_their_own_point_is_done) {
  // The worker wakes blocked waiters only once the lowest point any of them
  // waits for is done; a waiter for an earlier point must not be left asleep
  // until a later one completes, nor a later one released early.
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  orEvent_t early = nullptr;
  CHECK_OK(orEventCreate(&early));
  Latch first, second;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &first));
  CHECK_OK(orEventRecord(early, s));
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &second));
  std::atomic<int> stream_done{0}, event_done{0};
  std::thread stream_waiter([&] {
    if (orStreamSynchronize(s) == orSuccess) stream_done = 1;
  });
  std::this_thread::sleep_for(20ms);  // let the later waiter block first
  std::thread event_waiter([&] {
    if (orEventSynchronize(early) == orSuccess) event_done = 1;
  });
  std::this_thread::sleep_for(20ms);
  first.release();
  CHECK(eventually(event_done));
  CHECK_EQ(stream_done.load(), 0);
  second.release();
  CHECK(eventually(stream_done));
  stream_waiter.join();
  event_waiter.join();
  CHECK_OK(orEventDestroy(early));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(stream_wait_event_orders_work_across_streams) {
  orStream_t producer = nullptr, consumer = nullptr;
  CHECK_OK(orStreamCreate(&producer));
  CHECK_OK(orStreamCreate(&consumer));
  orEvent_t ready = nullptr;
  CHECK_OK(orEventCreateWithFlags(&ready, orEventDisableTiming));
  Latch latch;
  static std::atomic<int> produced{0}, seen_by_consumer{-1};
  produced = 0;
  CHECK_OK(orLaunchHostFunc(producer, &Latch::wait_fn, &latch));
  CHECK_OK(orLaunchHostFunc(producer, [](void*) { produced = 1; }, nullptr));
  CHECK_OK(orEventRecord(ready, producer));
  CHECK_OK(orStreamWaitEvent(consumer, ready, 0));
  CHECK_OK(orLaunchHostFunc(consumer, [](void*) { seen_by_consumer = produced.load(); },
                            nullptr));
  std::this_thread::sleep_for(20ms);
  CHECK_ERR(orStreamQuery(consumer), orErrorNotReady);  // held back by the event
  latch.release();
  CHECK_OK(orStreamSynchronize(consumer));
  CHECK_EQ(seen_by_consumer.load(), 1);

  // Waiting on an event that was never recorded is a no-op.
  orEvent_t fresh = nullptr;
  CHECK_OK(orEventCreate(&fresh));
  CHECK_OK(orStreamWaitEvent(consumer, fresh, 0));
  CHECK_OK(orStreamSynchronize(consumer));
  CHECK_ERR(orStreamWaitEvent(consumer, fresh, 1), orErrorInvalidValue);
  for (orEvent_t e : {ready, fresh}) CHECK_OK(orEventDestroy(e));
  CHECK_OK(orStreamDestroy(producer));
  CHECK_OK(orStreamDestroy(consumer));
}

OR_TEST(elapsed_time_between_completed_timing_events) {
  orEvent_t start = nullptr, end = nullptr, untimed = nullptr, unrecorded = nullptr;
  CHECK_OK(orEventCreate(&start));
  CHECK_OK(orEventCreateWithFlags(&end, orEventDefault));
  CHECK_OK(orEventCreateWithFlags(&untimed, orEventDisableTiming));
  CHECK_OK(orEventCreate(&unrecorded));
  orStream_t s = nullptr;
  CHECK_OK(orStreamCreate(&s));
  CHECK_OK(orEventRecord(start, s));
  CHECK_OK(orEventRecord(untimed, s));
  // The start stamp is taken no later than now; the end stamp no earlier than the
  // release below, which comes 25 ms from now.
  CHECK_OK(orEventSynchronize(start));
  Latch latch;
  CHECK_OK(orLaunchHostFunc(s, &Latch::wait_fn, &latch));
  CHECK_OK(orEventRecord(end, s));
  float ms = -1;
  CHECK_ERR(orEventElapsedTime(&ms, start, end), orErrorNotReady);
  std::this_thread::sleep_for(25ms);
  latch.release();
  CHECK_OK(orEventSynchronize(end));
  CHECK_OK(orEventElapsedTime(&ms, start, end));
  CHECK(ms >= 25.0f && ms < 2000.0f);
  std::printf("elapsed %.3f ms\n", static_cast<double>(ms));
  CHECK_ERR(orEventElapsedTime(&ms, start, untimed), orErrorInvalidResourceHandle);
  CHECK_ERR(orEventElapsedTime(&ms, start, unrecorded), orErrorInvalidResourceHandle);
  CHECK_ERR(orEventElapsedTime(nullptr, start, end), orErrorInvalidValue);
  for (orEvent_t e : {start, end, untimed, unrecorded}) CHECK_OK(orEventDestroy(e));
  CHECK_OK(orStreamDestroy(s));
}

OR_TEST(re_recording_an_event_moves_it) {
  orStream_t a = nullptr, b = nullptr;
  CHECK_OK(orStreamCreate(&a));
  CHECK_OK(orStreamCreate(&b));
  orEvent_t e = nullptr;
  CHECK_OK(orEventCreate(&e));
  Latch latch;
  CHECK_OK(orLaunchHostFunc(a, &Latch::wait_fn, &latch));
  CHECK_OK(orEventRecord(e, a));
  CHECK_ERR(orEventQuery(e), orErrorNotReady);
  CHECK_OK(orEventRecord(e, b));  // now only b's (empty) work counts
  CHECK_OK(orEventSynchronize(e));
  CHECK_OK(orEventQuery(e));
  latch.release();
  CHECK_OK(orStreamSynchronize(a));
  CHECK_OK(orEventDestroy(e));
  CHECK_OK(orStreamDestroy(a));
  CHECK_OK(orStreamDestroy(b));
}

OR_TEST_MAIN()
