// C entry points: memcpy and memset, synchronous and stream-ordered.
#include <cstring>
#include <memory>

#include "copy_plan.h"
#include "openreg.h"
#include "runtime.h"

using namespace openreg;

namespace {

orError_t plan(void* dst, const void* src, size_t count, orMemcpyKind kind, CopyPlan* out) {
  Runtime& rt = Runtime::get();
  return plan_copy(rt.attributes(dst), rt.attributes(src), count, kind, out);
}

// Synchronous calls are ordered after the default streams of the devices involved,
// like CUDA's legacy-stream sync for pageable copies.
void wait_default_streams(int a, int b) {
  Runtime& rt = Runtime::get();
  wait_streams({rt.existing_default_stream(a), a == b ? nullptr : rt.existing_default_stream(b)},
               SyncKind::Implicit);
}

// orErrorUnknown only if device memory could not be made accessible (mprotect failed).
orError_t copy_now(void* dst, const void* src, size_t count, bool touches_device) {
  if (!touches_device) {
    std::memmove(dst, src, count);
    return orSuccess;
  }
  AccessGate::Scope access(Runtime::get().gate());
  if (!access.entered()) return orErrorUnknown;
  std::memmove(dst, src, count);
  return orSuccess;
}

orError_t enqueue(orStream_st& stream, orStream_st::Work work, orStream_st::Seq* seq = nullptr) {
  const orStream_st::Seq s = stream.enqueue(std::move(work));
  if (s == 0) return orErrorRuntimeUnloading;
  if (seq != nullptr) *seq = s;
  return orSuccess;
}

}  // namespace

extern "C" {

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  return api_call([&]() -> orError_t {
    CopyPlan p;
    if (auto e = plan(dst, src, count, kind, &p); e != orSuccess) return e;
    if (count == 0) return orSuccess;
    wait_default_streams(p.dst_device, p.src_device);
    return copy_now(dst, src, count, p.touches_device());
  });
}

orError_t orMemcpyAsync(void* dst, const void* src, size_t count, orMemcpyKind kind,
                        orStream_t stream) {
  return api_call([&]() -> orError_t {
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    CopyPlan p;
    if (auto e = plan(dst, src, count, kind, &p); e != orSuccess) return e;
    if (count == 0) return orSuccess;
    const bool device = p.touches_device();

    if (p.dst_pageable) {
      // The caller may read pageable memory as soon as we return: wait for the copy.
      if (s->on_worker_thread()) return orErrorNotPermitted;
      orStream_st::Seq seq = 0;
      auto e = enqueue(*s, {[=] { std::memmove(dst, src, count); }, device}, &seq);
      if (e == orSuccess) s->wait(seq);
      return e;
    }
    if (p.src_pageable) {
      // The caller may overwrite pageable memory as soon as we return: stage it.
      std::shared_ptr<std::byte[]> staged(new std::byte[count]);
      std::memcpy(staged.get(), src, count);
      return enqueue(*s, {[=] { std::memcpy(dst, staged.get(), count); }, device});
    }
    return enqueue(*s, {[=] { std::memmove(dst, src, count); }, device});
  });
}

orError_t orMemset(void* dev_ptr, int value, size_t count) {
  return api_call([&]() -> orError_t {
    Runtime& rt = Runtime::get();
    const orPointerAttributes a = rt.attributes(dev_ptr);
    if (auto e = check_device_range(a, count); e != orSuccess) return e;
    if (count == 0) return orSuccess;
    wait_default_streams(a.device, a.device);
    AccessGate::Scope access(rt.gate());
    if (!access.entered()) return orErrorUnknown;
    std::memset(dev_ptr, value, count);
    return orSuccess;
  });
}

orError_t orMemsetAsync(void* dev_ptr, int value, size_t count, orStream_t stream) {
  return api_call([&]() -> orError_t {
    Runtime& rt = Runtime::get();
    StreamPtr s;
    if (auto e = rt.resolve(stream, &s); e != orSuccess) return e;
    const orPointerAttributes a = rt.attributes(dev_ptr);
    if (auto e = check_device_range(a, count); e != orSuccess) return e;
    if (count == 0) return orSuccess;
    return enqueue(*s, {[=] { std::memset(dev_ptr, value, count); }, true});
  });
}

}  // extern "C"
