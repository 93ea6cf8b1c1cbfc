// Caching device allocator for openreg (a small CUDACachingAllocator).
//
// Blocks are cached per (device, stream) after free and reused for requests of
// a similar size on the same stream, so steady-state training loops never call
// rtMalloc/rtFree. A block used on other streams (recordStream) is only reused
// once events recorded on those streams at free time have completed.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include "compat/TorchVersion.h"

namespace openreg {

class OpenRegDeviceAllocator;

// The process-wide allocator registered for PrivateUse1 (never destroyed, so
// tensors freed during interpreter shutdown still find it).
OpenRegDeviceAllocator& device_allocator();

class OpenRegDeviceAllocator final : public c10::DeviceAllocator {
 public:
  OpenRegDeviceAllocator();
  ~OpenRegDeviceAllocator() override;

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
#if OPENREG_TORCH_VERSION_AT_LEAST(2, 10)
  // COMPAT(>= 2.10): c10::DeviceAllocator::getMemoryInfo became a virtual, PR #156812
  // (torch.accelerator.get_memory_info). On 2.9 the method is only ours, for
  // torch.openreg.mem_get_info. CAN REMOVE when MIN_SUPPORTED >= 2.10 (keep the override).
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;
#else
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device);
#endif

  // The DataPtr deleter's target (ctx is the block).
  void freeBlock(void* ctx);

  // Blocks whose cross-stream uses are still pending (for tests/diagnostics).
  size_t pendingFrees(c10::DeviceIndex device);

 private:
  struct Impl;
  Impl* impl_;
};

} // namespace openreg
