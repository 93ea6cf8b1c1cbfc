// C entry points: allocation, pointer attributes, memory info.
#include "activity.h"
#include "openreg.h"
#include "runtime.h"
#include "thread_state.h"

using namespace openreg;

extern "C" {

orError_t orMalloc(void** dev_ptr, size_t size) {
  return api_call([&]() -> orError_t {
    if (dev_ptr == nullptr) return orErrorInvalidValue;
    *dev_ptr = nullptr;
    Runtime& rt = Runtime::get();
    const int device = current_device();
    if (!rt.valid_device(device)) return orErrorInvalidDevice;
    if (size == 0) return orSuccess;  // as cudaMalloc: success with a null pointer
    activity::SyncScope traced(activity::make(orActivityKindMalloc, device, 0, size));
    bool grew = false;
    void* p = rt.arena(device).allocate(size, &grew);
    if (p == nullptr) {
      traced.cancel();
      return orErrorMemoryAllocation;
    }
    if (grew) rt.gate().arena_grew();
    *dev_ptr = p;
    return orSuccess;
  });
}

orError_t orFree(void* dev_ptr) {
  return api_call([&]() -> orError_t {
    if (dev_ptr == nullptr) return orSuccess;
    Runtime& rt = Runtime::get();
    const int device = rt.device_of(dev_ptr);
    if (device < 0) return orErrorInvalidDevicePointer;
    auto block = rt.arena(device).find(dev_ptr);
    if (!block || block->base != dev_ptr) return orErrorInvalidDevicePointer;
    // Like cudaFree: queued work may still use the block, and releasing it may hand
    // its pages back to the OS.
    activity::SyncScope traced(activity::make(orActivityKindFree, device, 0, block->size));
    wait_streams(rt.streams_on(device), SyncKind::Implicit);
    if (!rt.arena(device).release(dev_ptr)) {
      traced.cancel();
      return orErrorInvalidDevicePointer;
    }
    return orSuccess;
  });
}

orError_t orMallocHost(void** host_ptr, size_t size) {
  return api_call([&]() -> orError_t {
    if (host_ptr == nullptr) return orErrorInvalidValue;
    *host_ptr = nullptr;
    if (size == 0) return orSuccess;
    void* p = Runtime::get().host().allocate(size);
    if (p == nullptr) return orErrorMemoryAllocation;
    *host_ptr = p;
    return orSuccess;
  });
}

orError_t orFreeHost(void* host_ptr) {
  return api_call([&]() -> orError_t {
    if (host_ptr == nullptr) return orSuccess;
    Runtime& rt = Runtime::get();
    auto block = rt.host().find(host_ptr);
    if (!block || block->base != host_ptr) return orErrorInvalidValue;
    // Asynchronous copies on any device may still read or write the block.
    wait_streams(rt.streams_on(-1), SyncKind::Implicit);
    return rt.host().release(host_ptr) ? orSuccess : orErrorInvalidValue;
  });
}

orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr) {
  return api_call([&]() -> orError_t {
    if (attributes == nullptr) return orErrorInvalidValue;
    *attributes = Runtime::get().attributes(ptr);
    return orSuccess;
  });
}

orError_t orMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return api_call([&]() -> orError_t {
    if (free_bytes == nullptr || total_bytes == nullptr) return orErrorInvalidValue;
    Runtime& rt = Runtime::get();
    const int device = current_device();
    if (!rt.valid_device(device)) return orErrorInvalidDevice;
    Arena& arena = rt.arena(device);
    *total_bytes = arena.capacity();
    *free_bytes = arena.capacity() - arena.used_bytes();
    return orSuccess;
  });
}

}  // extern "C"
