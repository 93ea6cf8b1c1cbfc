#include "stream.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>
#include <utility>

#include "access_gate.h"
#include "thread_state.h"

namespace {
thread_local const orStream_st* tls_worker_of = nullptr;
std::atomic<std::uint64_t> next_stream_id{1};
}

orStream_st::orStream_st(int device_, int priority_, bool is_default_, openreg::AccessGate& gate)
    : device(device_),
      priority(priority_),
      is_default(is_default_),
      id(next_stream_id.fetch_add(1, std::memory_order_relaxed)),
      gate_(gate) {}

std::shared_ptr<orStream_st> orStream_st::start(int device, int priority, bool is_default,
                                                openreg::AccessGate& gate) {
  auto stream = std::make_shared<orStream_st>(device, priority, is_default, gate);
  // Detached: nobody can join a thread that may itself drop the last reference to its
  // stream; wait_exited() is the join.
  std::thread([self = stream] { self->run(); }).detach();
  return stream;
}

orStream_st::Seq orStream_st::enqueue(Work work) {
  Seq seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::Running) return 0;
    queue_.push_back(std::move(work));
    seq = enqueued_.load(std::memory_order_relaxed) + 1;
    enqueued_.store(seq, std::memory_order_release);
  }
  // Outside the lock so the woken worker does not immediately block on it.
  work_cv_.notify_one();
  return seq;
}

void orStream_st::wait(Seq seq) const {
  if (done(seq)) return;
  std::unique_lock<std::mutex> lock(mu_);
  while (!done(seq)) {
    wake_at_ = std::min(wake_at_, seq);
    done_cv_.wait(lock);
  }
}

bool orStream_st::on_worker_thread() const { return tls_worker_of == this; }

orError_t orStream_st::take_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(error_, orSuccess);
}

void orStream_st::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::Running) state_ = State::Closing;
  }
  work_cv_.notify_one();
}

void orStream_st::abandon() {
  std::deque<Work> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::Abandoned;
    dropped.swap(queue_);
    completed_.store(enqueued_.load(std::memory_order_relaxed), std::memory_order_release);
  }
  work_cv_.notify_one();
  done_cv_.notify_all();
  // `dropped` is destroyed here, outside the lock: closures own staging buffers and
  // event records whose destructors must not run under our mutex.
}

bool orStream_st::wait_exited(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  return done_cv_.wait_until(lock, deadline, [&] { return exited_; });
}

void orStream_st::record_failure(const char* what) {
  std::fprintf(stderr, "openreg: work on stream %p (device %d) failed: %s\n",
               static_cast<const void*>(this), device, what);
  std::lock_guard<std::mutex> lock(mu_);
  if (error_ == orSuccess) error_ = orErrorLaunchFailure;
}

void orStream_st::execute(Work& work) {
  // Nothing may escape the worker: an exception here would std::terminate the process.
  try {
    if (work.device_access) {
      openreg::AccessGate::Scope access(gate_);
      if (!access.entered()) {
        record_failure("could not make device memory accessible (mprotect failed)");
        return;
      }
      work.fn();
    } else {
      work.fn();
    }
  } catch (const std::exception& e) {
    record_failure(e.what());
  } catch (...) {
    record_failure("non-standard exception");
  }
}

void orStream_st::run() {
  tls_worker_of = this;
  openreg::current_device() = device;
  // Opening the access gate costs two mprotect calls over all used device
  // memory (~100 us per 512 MiB on this kind of machine), more than a small
  // kernel. While kernels are queued back to back the gate stays open across
  // them; it is closed again before the last of them is reported
  // finished, so after a synchronize idle device memory is protected.
  std::optional<openreg::AccessGate::Scope> held_open;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !queue_.empty() || state_ != State::Running; });
    if (state_ == State::Abandoned || queue_.empty()) break;
    Work work = std::move(queue_.front());
    queue_.pop_front();
    const bool kernel_next = !queue_.empty() && queue_.front().device_access;
    lock.unlock();
    if (work.device_access && kernel_next && !held_open) held_open.emplace(gate_);
    execute(work);
    work = Work{};  // release captures before the item is reported finished
    lock.lock();
    // Host functions never run with the gate held open for them.
    if (held_open && (queue_.empty() || !queue_.front().device_access || state_ != State::Running)) {
      lock.unlock();
      held_open.reset();
      lock.lock();
    }
    // After abandon() everything already counts as finished.
    if (state_ != State::Abandoned) {
      completed_.store(completed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    if (done(wake_at_)) {
      wake_at_ = kNobodyWaiting;
      done_cv_.notify_all();
    }
  }
  exited_ = true;
  done_cv_.notify_all();
}
