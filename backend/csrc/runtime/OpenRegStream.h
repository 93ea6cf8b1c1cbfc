// c10::Stream <-> rtStream_t mapping, modelled on CUDAStream.
//
// Stream ids per device: 0 is the device's default stream; the others index a
// lazily created pool of kStreamsPerPriority streams per priority level (each
// runtime stream is a worker thread, so the pool is small and shared,
// round-robin, exactly like CUDA's getStreamFromPool).
#pragma once

#include <c10/core/Stream.h>

#include "runtime/rt/Runtime.h"

namespace openreg {

class OpenRegStream {
 public:
  explicit OpenRegStream(c10::Stream stream);

  c10::Stream unwrap() const { return stream_; }
  operator c10::Stream() const { return stream_; }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::StreamId id() const { return stream_.id(); }
  rtStream_t raw() const;
  int priority() const;
  bool query() const;        // true when all queued work finished
  void synchronize() const;  // blocks the calling host thread

  bool operator==(const OpenRegStream& o) const { return stream_ == o.stream_; }

 private:
  c10::Stream stream_;
};

// [current-stream]
// The rtStream_t behind the current c10 stream of `device` (the calling host
// thread's current stream, default stream unless changed). Kernels launch here.
rtStream_t getCurrentRawStream(c10::DeviceIndex device);
// [/current-stream]

OpenRegStream getCurrentStream(c10::DeviceIndex device = -1);
OpenRegStream getDefaultStream(c10::DeviceIndex device = -1);
// priority: as rtStreamCreateWithPriority (lower = higher priority); clamped.
OpenRegStream getStreamFromPool(int priority = 0, c10::DeviceIndex device = -1);
OpenRegStream getStreamFromPool(bool high_priority, c10::DeviceIndex device);
// Sets the current stream of the stream's device for the calling thread.
void setCurrentStream(const OpenRegStream& stream);
rtStream_t rawStream(const c10::Stream& stream);

// Priority range of the runtime: {least (numerically largest), greatest}.
std::pair<int, int> streamPriorityRange();

} // namespace openreg
