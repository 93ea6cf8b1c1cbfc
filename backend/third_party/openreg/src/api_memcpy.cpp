// C entry points: memcpy and memset, synchronous and stream-ordered.
#include <cstring>
#include <memory>

#include "activity.h"
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

// The device a copy is attributed to: the destination's for H2D and D2D (the
// one whose memory changes), the source's for D2H.
int copy_device(const CopyPlan& p) { return p.dst_device >= 0 ? p.dst_device : p.src_device; }

orActivityRecord copy_record(const CopyPlan& p, std::uint64_t stream_id, size_t count) {
  orActivityRecord r = activity::make(orActivityKindMemcpy, copy_device(p), stream_id, count);
  r.copy_kind = p.kind;
  return r;
}

}  // namespace

extern "C" {

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  return api_call([&]() -> orError_t {
    CopyPlan p;
    if (auto e = plan(dst, src, count, kind, &p); e != orSuccess) return e;
    if (count == 0) return orSuccess;
    wait_default_streams(p.dst_device, p.src_device);
    if (!p.touches_device()) return copy_now(dst, src, count, false);
    activity::SyncScope traced(copy_record(p, 0, count));
    const orError_t e = copy_now(dst, src, count, true);
    if (e != orSuccess) traced.cancel();
    return e;
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
    // Host-to-host copies through a stream are not device activity.
    auto traced = [&](std::function<void()> fn) {
      return device ? activity::timed(std::move(fn), copy_record(p, s->id, count)) : fn;
    };

    if (p.dst_pageable) {
      // The caller may read pageable memory as soon as we return: wait for the copy.
      if (s->on_worker_thread()) return orErrorNotPermitted;
      orStream_st::Seq seq = 0;
      auto e = enqueue(*s, {traced([=] { std::memmove(dst, src, count); }), device}, &seq);
      if (e == orSuccess) s->wait(seq);
      return e;
    }
    if (p.src_pageable) {
      // The caller may overwrite pageable memory as soon as we return: stage it.
      std::shared_ptr<std::byte[]> staged(new std::byte[count]);
      std::memcpy(staged.get(), src, count);
      return enqueue(*s, {traced([=] { std::memcpy(dst, staged.get(), count); }), device});
    }
    return enqueue(*s, {traced([=] { std::memmove(dst, src, count); }), device});
  });
}

orError_t orMemset(void* dev_ptr, int value, size_t count) {
  return api_call([&]() -> orError_t {
    Runtime& rt = Runtime::get();
    const orPointerAttributes a = rt.attributes(dev_ptr);
    if (auto e = check_device_range(a, count); e != orSuccess) return e;
    if (count == 0) return orSuccess;
    wait_default_streams(a.device, a.device);
    activity::SyncScope traced(activity::make(orActivityKindMemset, a.device, 0, count));
    AccessGate::Scope access(rt.gate());
    if (!access.entered()) {
      traced.cancel();
      return orErrorUnknown;
    }
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
    auto work = activity::timed([=] { std::memset(dev_ptr, value, count); },
                                activity::make(orActivityKindMemset, a.device, s->id, count));
    return enqueue(*s, {std::move(work), true});
  });
}

}  // extern "C"
