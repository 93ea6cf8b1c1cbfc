#include "runtime/OpenRegHostAllocator.h"

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/llvmMathExtras.h>

#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg {

namespace {

struct HostBlock {
  size_t size;
  void* ptr;
  std::vector<orEvent_t> events; // recorded by async copies that used it
  bool allocated = false;
};

void free_host_block(void* ctx);

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
      OPENREG_CHECK(orMallocHost(&ptr, rounded));
      block = new HostBlock{rounded, ptr};
      blocks_.emplace(ptr, block);
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(rounded);
    }
    block->allocated = true;
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(block->size);
    return {block->ptr, block, &free_host_block, c10::DeviceType::CPU};
  }

  void free(HostBlock* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(block->size);
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
    orEvent_t event = nullptr;
    OPENREG_CHECK(orEventCreateWithFlags(&event, orEventDisableTiming));
    OPENREG_CHECK(orEventRecord(event, OpenRegStream(stream).raw()));
    it->second->events.push_back(event);
    return true;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, block] : free_) {
      for (orEvent_t e : block->events) {
        OPENREG_WARN(orEventSynchronize(e));
        OPENREG_WARN(orEventDestroy(e));
      }
      blocks_.erase(block->ptr);
      OPENREG_WARN(orFreeHost(block->ptr));
      stats_.allocations.decrease(1);
      stats_.allocated_bytes.decrease(block->size);
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
    for (auto* s : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                    &stats_.allocated_bytes}) {
      s->reset_accumulated();
    }
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* s : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations,
                    &stats_.allocated_bytes}) {
      s->reset_peak();
    }
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
      if (orEventQuery(block->events.back()) == orErrorNotReady) {
        return false;
      }
      OPENREG_WARN(orEventDestroy(block->events.back()));
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

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &instance())

} // namespace openreg
