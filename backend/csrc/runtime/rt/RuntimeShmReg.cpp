// The shmreg runtime behind the runtime interface: adapters over libshmreg
// (third_party/shmreg), whose device memory lives in a server process.
//
// Where shmreg is simpler than the interface, the adapters say what they drop:
// copy kinds are not checked (every pointer is mapped in this process, so a
// copy is a copy whatever its direction), stream/event flags other than
// timing mean nothing to it, and it has no activity tracing (the profiler
// gets rtErrorNotSupported and traces host ops only).
#include "runtime/rt/Runtime.h"

#include <shmreg.h>

namespace openreg::rt {

namespace {

// shmreg's codes are the interface's where both have the error.
static_assert(static_cast<int>(shmErrorInitializationError) == rtErrorInitializationError);
static_assert(static_cast<int>(shmErrorNotPermitted) == rtErrorNotPermitted);
static_assert(static_cast<int>(shmErrorServerGone) == rtErrorDeviceUnavailable);

rtError_t E(shmError_t e) { return static_cast<rtError_t>(e); }
shmStream_t S(rtStream_t s) { return reinterpret_cast<shmStream_t>(s); }
shmEvent_t V(rtEvent_t e) { return reinterpret_cast<shmEvent_t>(e); }
rtError_t unsupported() { return rtErrorNotSupported; }

const RuntimeApi kShmReg = {
    .name = "shmreg",
    .getErrorString = [](rtError_t e) {
      return e == rtErrorNotSupported ? "not supported by the shmreg runtime"
                                      : shmGetErrorString(static_cast<shmError_t>(e));
    },
    .getErrorName = [](rtError_t e) {
      return e == rtErrorNotSupported ? "rtErrorNotSupported" : shmGetErrorName(static_cast<shmError_t>(e));
    },
    .getDeviceCount = [](int* n) { return E(shmGetDeviceCount(n)); },
    .setDevice = [](int d) { return E(shmSetDevice(d)); },
    .getDevice = [](int* d) { return E(shmGetDevice(d)); },
    .deviceSynchronize = [] { return E(shmDeviceSynchronize()); },
    .malloc = [](void** p, size_t n) { return E(shmMalloc(p, n)); },
    .free = [](void* p) { return E(shmFree(p)); },
    .mallocHost = [](void** p, size_t n) { return E(shmMallocHost(p, n)); },
    .freeHost = [](void* p) { return E(shmFreeHost(p)); },
    .memcpy = [](void* d, const void* s, size_t n, rtMemcpyKind) { return E(shmMemcpy(d, s, n)); },
    .memcpyAsync = [](void* d, const void* s, size_t n, rtMemcpyKind, rtStream_t st) {
      return E(shmMemcpyAsync(d, s, n, S(st)));
    },
    .memset = [](void* p, int v, size_t n) { return E(shmMemset(p, v, n)); },
    .memsetAsync = [](void* p, int v, size_t n, rtStream_t s) { return E(shmMemsetAsync(p, v, n, S(s))); },
    .pointerGetAttributes = [](rtPointerAttributes* a, const void* p) {
      if (a == nullptr) return rtErrorInvalidValue;
      int kind = 0;
      const rtError_t e = E(shmPointerGetInfo(p, &kind, &a->device, &a->base, &a->size));
      a->type = static_cast<rtMemoryType>(kind);  // 0/1/2: unregistered/host/device
      a->pointer = const_cast<void*>(p);
      return e;
    },
    .memGetInfo = [](size_t* f, size_t* t) { return E(shmMemGetInfo(f, t)); },
    .streamCreate = [](rtStream_t* s) { return E(shmStreamCreate(reinterpret_cast<shmStream_t*>(s), 0)); },
    .streamCreateWithPriority = [](rtStream_t* s, unsigned int, int prio) {
      return E(shmStreamCreate(reinterpret_cast<shmStream_t*>(s), prio));
    },
    .streamDestroy = [](rtStream_t s) { return E(shmStreamDestroy(S(s))); },
    .streamSynchronize = [](rtStream_t s) { return E(shmStreamSynchronize(S(s))); },
    .streamQuery = [](rtStream_t s) { return E(shmStreamQuery(S(s))); },
    .streamWaitEvent = [](rtStream_t s, rtEvent_t e, unsigned int) {
      return E(shmStreamWaitEvent(S(s), V(e)));
    },
    .streamGetPriority = [](rtStream_t s, int* p) { return E(shmStreamGetPriority(S(s), p)); },
    .streamGetDevice = [](rtStream_t s, int* d) { return E(shmStreamGetDevice(S(s), d)); },
    .streamGetId = [](rtStream_t s, unsigned long long* id) { return E(shmStreamGetId(S(s), id)); },
    .deviceGetStreamPriorityRange = [](int* least, int* greatest) {
      if (least != nullptr) *least = 0;
      if (greatest != nullptr) *greatest = -1;
      return rtSuccess;
    },
    .deviceGetDefaultStream = [](int d, rtStream_t* s) {
      return E(shmDeviceGetDefaultStream(d, reinterpret_cast<shmStream_t*>(s)));
    },
    .launchKernel = [](rtStream_t s, rtHostFn_t fn, void* u) { return E(shmLaunch(S(s), fn, u)); },
    .launchHostFunc = [](rtStream_t s, rtHostFn_t fn, void* u) { return E(shmLaunch(S(s), fn, u)); },
    .eventCreate = [](rtEvent_t* e) { return E(shmEventCreate(reinterpret_cast<shmEvent_t*>(e), 1)); },
    .eventCreateWithFlags = [](rtEvent_t* e, unsigned int flags) {
      const int timing = (flags & rtEventDisableTiming) == 0;
      return E(shmEventCreate(reinterpret_cast<shmEvent_t*>(e), timing));
    },
    .eventDestroy = [](rtEvent_t e) { return E(shmEventDestroy(V(e))); },
    .eventRecord = [](rtEvent_t e, rtStream_t s) { return E(shmEventRecord(V(e), S(s))); },
    .eventQuery = [](rtEvent_t e) { return E(shmEventQuery(V(e))); },
    .eventSynchronize = [](rtEvent_t e) { return E(shmEventSynchronize(V(e))); },
    .eventElapsedTime = [](float* ms, rtEvent_t a, rtEvent_t b) {
      return E(shmEventElapsedTime(ms, V(a), V(b)));
    },
    .activityEnable = [](int) { return unsupported(); },
    .activityPushCorrelationId = [](unsigned long long) { return unsupported(); },
    .activityPopCorrelationId = [](unsigned long long*) { return unsupported(); },
    .activityRead = [](rtActivityRecord*, size_t, size_t* n, unsigned long long*) {
      if (n != nullptr) *n = 0;
      return unsupported();
    },
};

}  // namespace

const RuntimeApi& shmreg_runtime() {
  return kShmReg;
}

}  // namespace openreg::rt
