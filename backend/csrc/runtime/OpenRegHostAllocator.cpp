#include "runtime/OpenRegHostAllocator.h"

#include <map>
#include <string>
#include <utility>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/llvmMathExtras.h>

#include "compat/TorchVersion.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg {

namespace {

struct HostBlock {
  size_t size;
  void* ptr;
  std::vector<rtEvent_t> events; // recorded by async copies that used it
  bool allocated = false;
};

void free_host_block(void* ctx);

// COMPAT(>= 2.10): at::HostStats renamed its counters, allocated_bytes changed meaning, PR #164412
// Up to 2.9: allocation/allocated_bytes = blocks in use, segment/reserved_bytes =
// every block held; since 2.10: active_requests/active_bytes = in use,
// allocations/allocated_bytes = held. The accessors carry the 2.10 names (in a
// namespace of their own: this file is compiled in a unity group).
// CAN REMOVE when MIN_SUPPORTED >= 2.10 (then use the fields directly).
namespace host_stats {
#if OPENREG_TORCH_VERSION_AT_LEAST(2, 10)
auto& active_requests(at::HostStats& s) { return s.active_requests; }
auto& active_bytes(at::HostStats& s) { return s.active_bytes; }
auto& allocations(at::HostStats& s) { return s.allocations; }
auto& allocated_bytes(at::HostStats& s) { return s.allocated_bytes; }
#else
auto& active_requests(at::HostStats& s) { return s.allocation; }
auto& active_bytes(at::HostStats& s) { return s.allocated_bytes; }
auto& allocations(at::HostStats& s) { return s.segment; }
auto& allocated_bytes(at::HostStats& s) { return s.reserved_bytes; }
#endif

// The four counters this allocator keeps, with their 2.10 names, so that
// resets and reports cannot miss one.
template <typename F>
void for_each(at::HostStats& s, F&& fn) {
  fn("active_requests", active_requests(s));
  fn("active_bytes", active_bytes(s));
  fn("allocations", allocations(s));
  fn("allocated_bytes", allocated_bytes(s));
}
} // namespace host_stats

// [host-allocator]
class OpenRegHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t size) override {
    if (size == 0) {
      return {nullptr, nullptr, &free_host_block, c10::DeviceType::CPU};
    }
    // Power-of-two buckets keep the cache hit rate high for the usual
    // "same batch shape every step" pattern.
    const size_t rounded = c10::llvm::PowerOf2Ceil(size);
    std::lock_guard<std::mutex> lock(mutex_);
    HostBlock* block = take_free(rounded);
    if (block == nullptr) {
      void* ptr = nullptr;
      OPENREG_CHECK(rtMallocHost(&ptr, rounded));
      block = new HostBlock{rounded, ptr};
      blocks_.emplace(ptr, block);
      host_stats::allocations(stats_).increase(1);
      host_stats::allocated_bytes(stats_).increase(rounded);
    }
    block->allocated = true;
    host_stats::active_requests(stats_).increase(1);
    host_stats::active_bytes(stats_).increase(block->size);
    return {block->ptr, block, &free_host_block, c10::DeviceType::CPU};
  }

  void free(HostBlock* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    host_stats::active_requests(stats_).decrease(1);
    host_stats::active_bytes(stats_).decrease(block->size);
    free_.emplace(block->size, block);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ctx);
    if (it == blocks_.end()) {
      it = blocks_.find(ptr);
    }
    if (it == blocks_.end()) {
      return false;
    }
    rtEvent_t event = nullptr;
    OPENREG_CHECK(rtEventCreateWithFlags(&event, rtEventDisableTiming));
    OPENREG_CHECK(rtEventRecord(event, OpenRegStream(stream).raw()));
    it->second->events.push_back(event);
    return true;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, block] : free_) {
      for (rtEvent_t e : block->events) {
        OPENREG_WARN(rtEventSynchronize(e));
        OPENREG_WARN(rtEventDestroy(e));
      }
      blocks_.erase(block->ptr);
      OPENREG_WARN(rtFreeHost(block->ptr));
      host_stats::allocations(stats_).decrease(1);
      host_stats::allocated_bytes(stats_).decrease(block->size);
      delete block;
    }
    free_.clear();
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    host_stats::for_each(stats_, [](const char*, auto& stat) { stat.reset_accumulated(); });
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    host_stats::for_each(stats_, [](const char*, auto& stat) { stat.reset_peak(); });
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  // First free block of the right bucket whose recorded copies are done.
  HostBlock* take_free(size_t rounded) {
    auto [begin, end] = free_.equal_range(rounded);
    for (auto it = begin; it != end; ++it) {
      HostBlock* block = it->second;
      if (events_done(block)) {
        free_.erase(it);
        return block;
      }
    }
    return nullptr;
  }

  static bool events_done(HostBlock* block) {
    while (!block->events.empty()) {
      if (rtEventQuery(block->events.back()) == rtErrorNotReady) {
        return false;
      }
      OPENREG_WARN(rtEventDestroy(block->events.back()));
      block->events.pop_back();
    }
    return true;
  }

  std::mutex mutex_;
  std::unordered_map<void*, HostBlock*> blocks_;
  std::multimap<size_t, HostBlock*> free_;
  at::HostStats stats_;
};
// [/host-allocator]

OpenRegHostAllocator& instance() {
  static auto* allocator = new OpenRegHostAllocator();
  return *allocator;
}

void free_host_block(void* ctx) {
  if (ctx != nullptr) {
    instance().free(static_cast<HostBlock*>(ctx));
  }
}

} // namespace

c10::Allocator* host_allocator() {
  return &instance();
}

bool host_record_stream(const void* ptr, void* ctx, c10::Stream stream) {
  return instance().record_event(const_cast<void*>(ptr), ctx, stream);
}

std::vector<std::pair<std::string, int64_t>> host_memory_stats() {
  at::HostStats stats = instance().get_stats();
  std::vector<std::pair<std::string, int64_t>> flat;
  host_stats::for_each(stats, [&](const char* name, const auto& stat) {
    const std::string prefix = std::string(name) + ".";
    flat.emplace_back(prefix + "current", stat.current);
    flat.emplace_back(prefix + "peak", stat.peak);
    flat.emplace_back(prefix + "allocated", stat.allocated);
    flat.emplace_back(prefix + "freed", stat.freed);
  });
  return flat;
}

void reset_peak_host_memory_stats() {
  instance().reset_peak_stats();
}

void host_empty_cache() {
  instance().empty_cache();
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &instance())

} // namespace openreg
