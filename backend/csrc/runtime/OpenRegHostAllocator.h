// Pinned host memory (orMallocHost) for PrivateUse1, cached like CUDA's
// CachingHostAllocator: a block that served an async copy is only reused after
// the events recorded on the copy's streams completed.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace openreg {

// The allocator behind torch.empty(..., pin_memory=True) / Tensor.pin_memory()
// when openreg is the accelerator. Registered with REGISTER_HOST_ALLOCATOR.
c10::Allocator* host_allocator();

// Marks the pinned block holding `ptr` as in use by `stream` (for async
// copies). Returns false when `ptr` is not from this allocator.
bool host_record_stream(const void* ptr, void* ctx, c10::Stream stream);

} // namespace openreg
