#include "runtime/OpenRegDeviceAllocator.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <c10/util/Exception.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg {

namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;          // runtime alignment
constexpr size_t kSmallSize = 1 << 20;         // <= 1 MiB: small pool
constexpr size_t kLargeReuseSlack = 2 << 20;   // a large block may be this much too big

size_t round_size(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

struct Block {
  c10::DeviceIndex device;
  c10::Stream stream; // the stream it was allocated on: reuse only there
  size_t size;        // rounded
  size_t requested;
  void* ptr;
  std::unordered_set<c10::Stream> stream_uses;
  int pending_events = 0;
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) {
      return a->stream.id() < b->stream.id();
    }
    if (a->size != b->size) {
      return a->size < b->size;
    }
    return a->ptr < b->ptr;
  }
};

void update(StatArray& stats, size_t size, int64_t amount) {
  const auto pool = size <= kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL;
  for (auto type : {StatType::AGGREGATE, pool}) {
    auto& stat = stats[static_cast<size_t>(type)];
    if (amount >= 0) {
      stat.increase(static_cast<size_t>(amount));
    } else {
      stat.decrease(static_cast<size_t>(-amount));
    }
  }
}

void free_block_ptr(void* ctx);

} // namespace

struct OpenRegDeviceAllocator::Impl {
  struct Device {
    std::mutex mutex;
    DeviceStats stats;
    std::set<Block*, BlockLess> cached;
    std::unordered_map<void*, Block*> active;
    std::deque<std::pair<rtEvent_t, Block*>> pending; // cross-stream frees
  };

  // Sized at the first use, not when the library loads (this allocator is
  // registered by a static initialiser): the runtime reads OPENREG_DEVICE_COUNT at
  // its first query, so a process forked before any device use (the test suite's
  // preloaded interpreter) still gets the count its own environment sets.
  std::vector<std::unique_ptr<Device>>& all() {
    std::call_once(sized_, [this] {
      for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
        devices_.push_back(std::make_unique<Device>());
      }
    });
    return devices_;
  }

  Device& get(c10::DeviceIndex device) {
    check_device_index(device);
    return *all()[device];
  }

  // [allocator-malloc]
  Block* malloc(c10::DeviceIndex device, size_t requested) {
    auto& d = get(device);
    const size_t size = round_size(requested);
    const c10::Stream stream = getCurrentStream(device).unwrap();
    std::lock_guard<std::mutex> lock(d.mutex);
    process_events(d);

    Block* block = take_cached(d, stream, size);
    if (block == nullptr) {
      block = new_segment(d, device, stream, size);
    }
    block->requested = requested;
    d.active.emplace(block->ptr, block);
    update(d.stats.allocation, block->size, 1);
    update(d.stats.active, block->size, 1);
    update(d.stats.allocated_bytes, block->size, static_cast<int64_t>(block->size));
    update(d.stats.active_bytes, block->size, static_cast<int64_t>(block->size));
    update(d.stats.requested_bytes, block->size, static_cast<int64_t>(requested));
    return block;
  }
  // [/allocator-malloc]

  Block* take_cached(Device& d, const c10::Stream& stream, size_t size) {
    Block key{stream.device_index(), stream, size, 0, nullptr, {}, 0};
    auto it = d.cached.lower_bound(&key);
    if (it == d.cached.end() || (*it)->stream != stream) {
      return nullptr;
    }
    // Do not hand a huge cached block to a small request: it would pin
    // memory the next large request needs.
    const size_t limit = size <= kSmallSize ? 2 * size : size + kLargeReuseSlack;
    if ((*it)->size > limit) {
      return nullptr;
    }
    Block* block = *it;
    d.cached.erase(it);
    return block;
  }

  Block* new_segment(Device& d, c10::DeviceIndex device, const c10::Stream& stream, size_t size) {
    void* ptr = nullptr;
    const auto previous = exchange_device(device);
    rtError_t err = rtMalloc(&ptr, size);
    if (err == rtErrorMemoryAllocation && !d.cached.empty()) {
      // Out of arena space: give the cache back to the runtime and retry once.
      d.stats.num_alloc_retries += 1;
      release_cached(d);
      err = rtMalloc(&ptr, size);
    }
    set_device(previous);
    if (err == rtErrorMemoryAllocation) {
      d.stats.num_ooms += 1;
      size_t free_bytes = 0, total_bytes = 0;
      (void)rtMemGetInfo(&free_bytes, &total_bytes);
      TORCH_CHECK_WITH(
          OutOfMemoryError, false,
          "openreg out of memory. Tried to allocate ", size, " bytes on device ",
          static_cast<int>(device), " (", free_bytes, " of ", total_bytes,
          " bytes free; ", d.stats.reserved_bytes[0].current,
          " bytes reserved by PyTorch)");
    }
    OPENREG_CHECK(err);
    d.stats.num_device_alloc += 1;
    update(d.stats.segment, size, 1);
    update(d.stats.reserved_bytes, size, static_cast<int64_t>(size));
    return new Block{device, stream, size, 0, ptr, {}, 0};
  }

  // [allocator-free]
  void free(Block* block) {
    auto& d = *all()[block->device];
    std::lock_guard<std::mutex> lock(d.mutex);
    d.active.erase(block->ptr);
    update(d.stats.allocation, block->size, -1);
    update(d.stats.active, block->size, -1);
    update(d.stats.allocated_bytes, block->size, -static_cast<int64_t>(block->size));
    update(d.stats.active_bytes, block->size, -static_cast<int64_t>(block->size));
    update(d.stats.requested_bytes, block->size, -static_cast<int64_t>(block->requested));
    if (block->stream_uses.empty()) {
      d.cached.insert(block);
      return;
    }
    // Other streams may still read the block: only recycle it once work
    // queued on them so far is done.
    for (const auto& s : block->stream_uses) {
      rtEvent_t event = nullptr;
      OPENREG_CHECK(rtEventCreateWithFlags(&event, rtEventDisableTiming));
      OPENREG_CHECK(rtEventRecord(event, OpenRegStream(s).raw()));
      d.pending.emplace_back(event, block);
      block->pending_events += 1;
    }
    block->stream_uses.clear();
  }
  // [/allocator-free]

  void process_events(Device& d, bool wait = false) {
    while (!d.pending.empty()) {
      auto [event, block] = d.pending.front();
      if (wait) {
        OPENREG_CHECK(rtEventSynchronize(event));
      } else if (rtEventQuery(event) == rtErrorNotReady) {
        break; // FIFO is good enough: events complete roughly in order
      }
      OPENREG_WARN(rtEventDestroy(event));
      d.pending.pop_front();
      if (--block->pending_events == 0) {
        d.cached.insert(block);
      }
    }
  }

  void release_cached(Device& d) {
    for (Block* block : d.cached) {
      OPENREG_WARN(rtFree(block->ptr));
      d.stats.num_device_free += 1;
      update(d.stats.segment, block->size, -1);
      update(d.stats.reserved_bytes, block->size, -static_cast<int64_t>(block->size));
      delete block;
    }
    d.cached.clear();
  }

 private:
  std::once_flag sized_;
  std::vector<std::unique_ptr<Device>> devices_;
};

namespace {
void free_block_ptr(void* ctx) {
  device_allocator().freeBlock(ctx);
}
} // namespace

void OpenRegDeviceAllocator::freeBlock(void* ctx) {
  impl_->free(static_cast<Block*>(ctx));
}

OpenRegDeviceAllocator::OpenRegDeviceAllocator() : impl_(new Impl()) {}

// The singleton is never destroyed (see device_allocator()); nothing to do.
OpenRegDeviceAllocator::~OpenRegDeviceAllocator() = default;

c10::DataPtr OpenRegDeviceAllocator::allocate(size_t nbytes) {
  const auto device = current_device();
  if (nbytes == 0) {
    return {nullptr, nullptr, &free_block_ptr, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }
  lazy_init();
  Block* block = impl_->malloc(device, nbytes);
  return {block->ptr, block, &free_block_ptr, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

c10::DeleterFnPtr OpenRegDeviceAllocator::raw_deleter() const {
  // Raw pointers would lose the block context the deleter needs.
  return nullptr;
}

void OpenRegDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  OPENREG_CHECK(rtMemcpy(dest, src, count, rtMemcpyDeviceToDevice));
}

bool OpenRegDeviceAllocator::initialized() {
  return is_initialized();
}

void OpenRegDeviceAllocator::emptyCache(c10::MempoolId_t) {
  for (auto& d : impl_->all()) {
    std::lock_guard<std::mutex> lock(d->mutex);
    impl_->process_events(*d, /*wait=*/true);
    impl_->release_cached(*d);
  }
}

void OpenRegDeviceAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  if (ptr.get() == nullptr || ptr.get_deleter() != &free_block_ptr) {
    return; // empty tensor, or memory this allocator does not own
  }
  auto* block = static_cast<Block*>(ptr.get_context());
  auto& d = impl_->get(block->device);
  std::lock_guard<std::mutex> lock(d.mutex);
  if (stream != block->stream) {
    block->stream_uses.insert(stream);
  }
}

c10::CachingDeviceAllocator::DeviceStats OpenRegDeviceAllocator::getDeviceStats(
    c10::DeviceIndex device) {
  auto& d = impl_->get(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.stats;
}

namespace {

// Every per-pool stat array of DeviceStats, so resets cannot miss one.
template <typename F>
void forEachStat(c10::CachingDeviceAllocator::DeviceStats& stats, F&& fn) {
  for (auto* array : {&stats.allocation, &stats.segment, &stats.active,
                      &stats.inactive_split, &stats.allocated_bytes,
                      &stats.reserved_bytes, &stats.active_bytes,
                      &stats.inactive_split_bytes, &stats.requested_bytes}) {
    for (auto& stat : *array) {
      fn(stat);
    }
  }
}

} // namespace

void OpenRegDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  auto& d = impl_->get(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  forEachStat(d.stats, [](auto& stat) { stat.reset_accumulated(); });
  d.stats.num_alloc_retries = 0;
  d.stats.num_ooms = 0;
  d.stats.num_device_alloc = 0;
  d.stats.num_device_free = 0;
}

void OpenRegDeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  auto& d = impl_->get(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  forEachStat(d.stats, [](auto& stat) { stat.reset_peak(); });
}

std::pair<size_t, size_t> OpenRegDeviceAllocator::getMemoryInfo(c10::DeviceIndex device) {
  const auto previous = exchange_device(device);
  size_t free_bytes = 0, total_bytes = 0;
  const rtError_t err = rtMemGetInfo(&free_bytes, &total_bytes);
  set_device(previous);
  OPENREG_CHECK(err);
  return {free_bytes, total_bytes};
}

size_t OpenRegDeviceAllocator::pendingFrees(c10::DeviceIndex device) {
  auto& d = impl_->get(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  impl_->process_events(d);
  return d.pending.size();
}

OpenRegDeviceAllocator& device_allocator() {
  static auto* allocator = new OpenRegDeviceAllocator();
  return *allocator;
}

namespace {
// Registered at load time so at::GetAllocator(kPrivateUse1) finds it; the
// object itself is created on first use.
struct RegisterAllocator {
  RegisterAllocator() {
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &device_allocator());
  }
} register_allocator;
} // namespace

} // namespace openreg
