// Pinned host memory (rtMallocHost) for PrivateUse1, cached like CUDA's
// CachingHostAllocator: a block that served an async copy is only reused after
// the events recorded on the copy's streams completed.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace openreg {

// The allocator behind torch.empty(..., pin_memory=True) / Tensor.pin_memory()
// when openreg is the accelerator. Registered with REGISTER_HOST_ALLOCATOR.
c10::Allocator* host_allocator();

// Marks the pinned block holding `ptr` as in use by `stream` (for async
// copies). Returns false when `ptr` is not from this allocator.
bool host_record_stream(const void* ptr, void* ctx, c10::Stream stream);

// The pinned allocator's counters, flat ("allocations.current",
// "active_bytes.peak", ...) and named as torch >= 2.10's at::HostStats on every
// supported release: active_* = blocks handed out, allocations/allocated_bytes =
// blocks held (in use or cached).
std::vector<std::pair<std::string, int64_t>> host_memory_stats();
void reset_peak_host_memory_stats();
// Returns every cached, unused pinned block to the runtime (after the copies
// that used it have finished).
void host_empty_cache();

} // namespace openreg
