// Events: a marker in a stream's sequence, optionally with the time it was reached.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "stream.h"

namespace openreg {

// One orEventRecord. Shared by the event and the queued marker item, so re-recording
// or destroying the event never races with a marker that is still in flight.
struct Record {
  std::shared_ptr<orStream_st> stream;
  orStream_st::Seq seq = 0;
  std::atomic<std::int64_t> reached_ns{0};  // steady_clock, written by the worker

  bool done() const { return stream->done(seq); }
};

}  // namespace openreg

struct orEvent_st {
  explicit orEvent_st(unsigned flags_) : flags(flags_) {}

  bool timing() const { return (flags & orEventDisableTiming) == 0; }
  std::shared_ptr<openreg::Record> last_record() const {
    std::lock_guard<std::mutex> lock(mu);
    return record;
  }

  const unsigned flags;
  mutable std::mutex mu;
  std::shared_ptr<openreg::Record> record;  // null until recorded
};
