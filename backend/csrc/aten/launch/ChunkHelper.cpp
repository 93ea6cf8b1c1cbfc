#include "aten/launch/ChunkHelper.h"

#include "aten/launch/Spin.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace openreg::native {
namespace {

class ChunkHelper {
 public:
  bool offer(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (job_) {
        return false;
      }
      job_ = std::move(job);
      has_job_.store(true, std::memory_order_release);
    }
    cv_.notify_one();
    return true;
  }

  void run() {
    for (;;) {
      spin_until([&] { return has_job_.load(std::memory_order_acquire); });
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return job_ != nullptr; });
        job = std::move(job_);
        job_ = nullptr;
        has_job_.store(false, std::memory_order_relaxed);
      }
      job();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;  // guarded by mu_; empty when the slot is free
  std::atomic<bool> has_job_{false};
};

ChunkHelper* start_helper() {
  // Leaked on purpose: the thread outlives static destruction at exit.
  auto* helper = new ChunkHelper();
  try {
    std::thread([helper] { helper->run(); }).detach();
  } catch (const std::system_error&) {
    return nullptr;
  }
  return helper;
}

} // namespace

bool offer_to_chunk_helper(std::function<void()> job) {
  // In a forked child the thread is gone but the object says it is there: jobs
  // then wait in the slot forever and callers do all the work themselves.
  static ChunkHelper* helper = start_helper();
  return helper != nullptr && helper->offer(std::move(job));
}

} // namespace openreg::native
