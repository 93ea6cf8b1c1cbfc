#include "runtime/OpenRegStream.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/OpenRegFunctions.h"

namespace openreg {

namespace {

constexpr int kStreamsPerPriority = 4;
// Bounded so stream ids stay dense; the runtime currently offers 2 levels.
constexpr int kMaxPriorityLevels = 8;
constexpr int kMaxDevices = 64;

struct PriorityRange {
  int least = 0;
  int greatest = 0;
  int levels() const { return least - greatest + 1; }
};

const PriorityRange& priority_range() {
  static const PriorityRange range = [] {
    PriorityRange r;
    OPENREG_CHECK(rtDeviceGetStreamPriorityRange(&r.least, &r.greatest));
    if (r.levels() > kMaxPriorityLevels) {
      r.greatest = r.least - kMaxPriorityLevels + 1;
    }
    return r;
  }();
  return range;
}

// All streams of one device. Created on first use of a pool stream.
struct DevicePool {
  std::once_flag default_once;
  rtStream_t default_stream = nullptr;
  std::once_flag pool_once;
  // [level][slot], level 0 = least priority.
  std::vector<std::array<rtStream_t, kStreamsPerPriority>> streams;
  std::array<std::atomic<uint32_t>, kMaxPriorityLevels> next{};
};

DevicePool& pool(c10::DeviceIndex device) {
  static std::array<DevicePool, kMaxDevices> pools;
  check_device_index(device);
  return pools[device];
}

rtStream_t default_raw(c10::DeviceIndex device) {
  auto& p = pool(device);
  std::call_once(p.default_once, [&] {
    OPENREG_CHECK(rtDeviceGetDefaultStream(device, &p.default_stream));
  });
  return p.default_stream;
}

void init_pool(c10::DeviceIndex device) {
  auto& p = pool(device);
  std::call_once(p.pool_once, [&] {
    const auto& range = priority_range();
    const auto previous = exchange_device(device);
    p.streams.resize(range.levels());
    for (int level = 0; level < range.levels(); ++level) {
      for (auto& s : p.streams[level]) {
        OPENREG_CHECK(rtStreamCreateWithPriority(&s, 0, range.least - level));
      }
    }
    set_device(previous);
  });
}

// id = 1 + level * kStreamsPerPriority + slot
c10::StreamId make_id(int level, int slot) {
  return 1 + level * kStreamsPerPriority + slot;
}

thread_local std::array<c10::StreamId, kMaxDevices> tls_current{};

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? current_device() : device;
}

} // namespace

OpenRegStream::OpenRegStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(
      stream.device_type() == c10::DeviceType::PrivateUse1,
      "expected an openreg stream, got a stream on ", stream.device());
}

rtStream_t OpenRegStream::raw() const {
  const auto device = device_index();
  const auto id = stream_.id();
  if (id == 0) {
    return default_raw(device);
  }
  init_pool(device);
  const auto index = id - 1;
  const auto& streams = pool(device).streams;
  TORCH_CHECK(
      index >= 0 && index / kStreamsPerPriority < static_cast<int64_t>(streams.size()),
      "openreg: unknown stream id ", id, " on device ", static_cast<int>(device));
  return streams[index / kStreamsPerPriority][index % kStreamsPerPriority];
}

int OpenRegStream::priority() const {
  int priority = 0;
  OPENREG_CHECK(rtStreamGetPriority(raw(), &priority));
  return priority;
}

bool OpenRegStream::query() const {
  const rtError_t err = rtStreamQuery(raw());
  if (err == rtErrorNotReady) {
    return false;
  }
  OPENREG_CHECK(err);
  return true;
}

void OpenRegStream::synchronize() const {
  OPENREG_CHECK(rtStreamSynchronize(raw()));
}

rtStream_t getCurrentRawStream(c10::DeviceIndex device) {
  return getCurrentStream(device).raw();
}

OpenRegStream getCurrentStream(c10::DeviceIndex device) {
  device = resolve(device);
  check_device_index(device);
  return OpenRegStream(c10::Stream(
      c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
      tls_current[device]));
}

OpenRegStream getDefaultStream(c10::DeviceIndex device) {
  device = resolve(device);
  check_device_index(device);
  return OpenRegStream(c10::Stream(
      c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, device)));
}

OpenRegStream getStreamFromPool(int priority, c10::DeviceIndex device) {
  device = resolve(device);
  init_pool(device);
  const auto& range = priority_range();
  // Clamp like CUDA: out-of-range priorities map to the nearest level.
  const int clamped = std::min(range.least, std::max(range.greatest, priority));
  const int level = range.least - clamped;
  const int slot = static_cast<int>(pool(device).next[level]++ % kStreamsPerPriority);
  return OpenRegStream(c10::Stream(
      c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
      make_id(level, slot)));
}

OpenRegStream getStreamFromPool(bool high_priority, c10::DeviceIndex device) {
  const auto& range = priority_range();
  return getStreamFromPool(high_priority ? range.greatest : range.least, device);
}

void setCurrentStream(const OpenRegStream& stream) {
  check_device_index(stream.device_index());
  tls_current[stream.device_index()] = stream.id();
}

rtStream_t rawStream(const c10::Stream& stream) {
  return OpenRegStream(stream).raw();
}

std::pair<int, int> streamPriorityRange() {
  const auto& range = priority_range();
  return {range.least, range.greatest};
}

} // namespace openreg
