#include "activity.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

#include "runtime.h"

namespace openreg::activity {

std::atomic<bool> g_enabled{false};

namespace {

// Beyond this many undrained records new ones are dropped (and counted), so a
// profiler that never reads cannot grow the process without bound.
constexpr std::size_t kMaxBuffered = std::size_t{1} << 20;

std::mutex g_mu;
std::atomic<std::uint64_t> g_next_id{1};
std::vector<orActivityRecord> g_records;
std::uint64_t g_dropped = 0;

// Correlation ids are per host thread: the op that is being dispatched on this
// thread owns whatever the thread submits.
thread_local std::vector<std::uint64_t> tls_correlation;

int host_thread_id() {
  thread_local const int tid = static_cast<int>(::syscall(SYS_gettid));
  return tid;
}

}  // namespace

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::uint64_t current_correlation() {
  return tls_correlation.empty() ? 0 : tls_correlation.back();
}

void append(const orActivityRecord& record) {
  // Tracing may have been switched off while the work was queued: a stopped
  // profiler must not see records from after its window.
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_records.size() >= kMaxBuffered) {
    ++g_dropped;
    return;
  }
  g_records.push_back(record);
}

orActivityRecord make(orActivityKind kind, int device, std::uint64_t stream_id, std::size_t bytes) {
  orActivityRecord r{};
  r.kind = kind;
  r.device = device;
  r.stream_id = stream_id;
  r.correlation_id = current_correlation();
  r.bytes = bytes;
  r.copy_kind = orMemcpyDefault;
  r.id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  return r;
}

std::function<void()> timed(std::function<void()> fn, orActivityRecord proto) {
  if (!enabled()) return fn;
  // Where the host submitted it: a profiler draws the launch on this thread
  // and an arrow to the device work, as CUDA traces show cudaLaunchKernel.
  proto.submit_ns = now_ns();
  proto.submit_thread = host_thread_id();
  return [fn = std::move(fn), proto]() mutable {
    proto.start_ns = now_ns();
    fn();
    proto.end_ns = now_ns();
    append(proto);
  };
}

SyncScope::SyncScope(orActivityRecord proto) : record_(proto), active_(enabled()) {
  if (active_) record_.start_ns = now_ns();
}

SyncScope::~SyncScope() {
  if (!active_) return;
  record_.end_ns = now_ns();
  append(record_);
}

}  // namespace openreg::activity

using namespace openreg;

extern "C" {

orError_t orActivityEnable(int enable) {
  std::lock_guard<std::mutex> lock(activity::g_mu);
  if (enable) {
    // A new window starts empty: leftovers belong to an earlier profiler.
    activity::g_records.clear();
    activity::g_dropped = 0;
  }
  activity::g_enabled.store(enable != 0, std::memory_order_relaxed);
  return orSuccess;
}

orError_t orActivityPushCorrelationId(unsigned long long id) {
  activity::tls_correlation.push_back(id);
  return orSuccess;
}

orError_t orActivityPopCorrelationId(unsigned long long* id) {
  if (activity::tls_correlation.empty()) return orErrorInvalidValue;
  if (id != nullptr) *id = activity::tls_correlation.back();
  activity::tls_correlation.pop_back();
  return orSuccess;
}

orError_t orActivityRead(orActivityRecord* records, size_t capacity, size_t* count,
                         unsigned long long* dropped) {
  if (count == nullptr || (records == nullptr && capacity != 0)) return orErrorInvalidValue;
  std::lock_guard<std::mutex> lock(activity::g_mu);
  const std::size_t n = std::min(capacity, activity::g_records.size());
  std::copy(activity::g_records.begin(), activity::g_records.begin() + static_cast<long>(n), records);
  activity::g_records.erase(activity::g_records.begin(), activity::g_records.begin() + static_cast<long>(n));
  *count = n;
  if (dropped != nullptr) *dropped = activity::g_dropped;
  return orSuccess;
}

}  // extern "C"
