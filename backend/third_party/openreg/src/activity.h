// Activity tracing: what the device did, for profilers.
//
// Off by default and then costs one relaxed atomic load per submission. While on,
// every kernel, copy, memset and allocation appends one orActivityRecord to a
// process-wide buffer that a profiler drains with orActivityRead. Timestamps are
// CLOCK_REALTIME nanoseconds, the clock PyTorch's profiler puts its own events on,
// so device records line up with host ops without conversion.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "openreg.h"

namespace openreg::activity {

extern std::atomic<bool> g_enabled;

inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
std::int64_t now_ns();
// The innermost correlation id pushed on this thread, 0 if none.
std::uint64_t current_correlation();
void append(const orActivityRecord& record);

// A record whose start/end are filled in when `fn` runs (on a stream worker).
// Returns `fn` unchanged when tracing is off.
std::function<void()> timed(std::function<void()> fn, orActivityRecord proto);

// Times a synchronous call: the record is appended when the scope ends.
class SyncScope {
 public:
  explicit SyncScope(orActivityRecord proto);
  ~SyncScope();
  SyncScope(const SyncScope&) = delete;
  SyncScope& operator=(const SyncScope&) = delete;
  // The call failed: nothing happened on the device, so nothing is recorded.
  void cancel() { active_ = false; }

 private:
  orActivityRecord record_;
  bool active_;
};

orActivityRecord make(orActivityKind kind, int device, std::uint64_t stream_id, std::size_t bytes);

}  // namespace openreg::activity
