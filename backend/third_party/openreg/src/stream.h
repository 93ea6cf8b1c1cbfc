// A stream: one worker thread executing its queue strictly in order.
//
// Work is counted with sequence numbers: enqueue() hands out 1, 2, 3, ... and the
// worker publishes how many items have finished. "Has item n finished" is then a
// single atomic load, which is all events and synchronisation need.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "openreg.h"

namespace openreg {
class AccessGate;
}

struct orStream_st : std::enable_shared_from_this<orStream_st> {
 public:
  using Seq = std::uint64_t;

  struct Work {
    std::function<void()> fn;
    bool device_access;  // run inside the access gate (a kernel or a runtime copy)
  };

  // Starts the worker thread. The thread keeps the stream alive until it exits, so
  // a stream destroyed with work still queued drains it first (as in CUDA).
  static std::shared_ptr<orStream_st> start(int device, int priority, bool is_default,
                                            openreg::AccessGate& gate);

  orStream_st(int device, int priority, bool is_default, openreg::AccessGate& gate);
  orStream_st(const orStream_st&) = delete;
  orStream_st& operator=(const orStream_st&) = delete;

  // The item's sequence number, or 0 if the stream no longer accepts work.
  Seq enqueue(Work work);
  Seq last_enqueued() const { return enqueued_.load(std::memory_order_acquire); }
  bool done(Seq seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  bool idle() const { return done(last_enqueued()); }
  void wait(Seq seq) const;
  // True on this stream's worker thread, where waiting for the stream would deadlock.
  bool on_worker_thread() const;
  // The first failure (an exception from user work) since the last call; clears it.
  orError_t take_error();

  // Accept no more work; the worker drains the queue and exits.
  void close();
  // Accept no more work and drop what is queued; pending items count as finished so
  // nobody waits for them. Used at process exit.
  void abandon();
  bool wait_exited(std::chrono::steady_clock::time_point deadline) const;

  const int device;
  const int priority;
  const bool is_default;
  const std::uint64_t id;  // orStreamGetId: from 1, never reused

 private:
  enum class State { Running, Closing, Abandoned };

  void run();
  void execute(Work& work);
  void record_failure(const char* what);

  openreg::AccessGate& gate_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  mutable std::condition_variable done_cv_;
  // The lowest sequence number a wait() is blocked on (guarded by mu_): the
  // worker wakes waiters only once that item is done, not after every item,
  // so a host thread synchronizing on a long queue sleeps through it.
  mutable Seq wake_at_ = kNobodyWaiting;
  static constexpr Seq kNobodyWaiting = ~Seq{0};
  std::deque<Work> queue_;
  std::atomic<Seq> enqueued_{0};
  std::atomic<Seq> completed_{0};
  State state_ = State::Running;
  bool exited_ = false;
  orError_t error_ = orSuccess;
};
