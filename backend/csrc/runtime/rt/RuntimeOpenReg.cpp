// The openreg runtime behind the runtime interface: thin adapters over
// libopenreg's C API (third_party/openreg), whose calls already have the
// interface's semantics. Enum values and struct layouts are the same by
// construction (checked below), so the adapters only convert types.
#include "runtime/rt/Runtime.h"

#include <type_traits>

#include <openreg.h>

namespace openreg::rt {

namespace {

static_assert(rtErrorNotPermitted == static_cast<int>(orErrorNotPermitted));
static_assert(rtErrorUnknown == static_cast<int>(orErrorUnknown));
static_assert(rtMemcpyDefault == static_cast<int>(orMemcpyDefault));
static_assert(rtMemoryTypeDevice == static_cast<int>(orMemoryTypeDevice));
static_assert(rtActivityKindFree == static_cast<int>(orActivityKindFree));
static_assert(rtEventDisableTiming == orEventDisableTiming);
static_assert(sizeof(rtPointerAttributes) == sizeof(orPointerAttributes));
static_assert(sizeof(rtActivityRecord) == sizeof(orActivityRecord));
static_assert(offsetof(rtActivityRecord, submit_thread) == offsetof(orActivityRecord, submit_thread));

rtError_t E(orError_t e) { return static_cast<rtError_t>(e); }
orStream_t S(rtStream_t s) { return reinterpret_cast<orStream_t>(s); }
orEvent_t V(rtEvent_t e) { return reinterpret_cast<orEvent_t>(e); }
orMemcpyKind K(rtMemcpyKind k) { return static_cast<orMemcpyKind>(k); }

const RuntimeApi kOpenReg = {
    .name = "openreg",
    .getErrorString = [](rtError_t e) { return orGetErrorString(static_cast<orError_t>(e)); },
    .getErrorName = [](rtError_t e) { return orGetErrorName(static_cast<orError_t>(e)); },
    .getDeviceCount = [](int* n) { return E(orGetDeviceCount(n)); },
    .setDevice = [](int d) { return E(orSetDevice(d)); },
    .getDevice = [](int* d) { return E(orGetDevice(d)); },
    .deviceSynchronize = [] { return E(orDeviceSynchronize()); },
    .malloc = [](void** p, size_t n) { return E(orMalloc(p, n)); },
    .free = [](void* p) { return E(orFree(p)); },
    .mallocHost = [](void** p, size_t n) { return E(orMallocHost(p, n)); },
    .freeHost = [](void* p) { return E(orFreeHost(p)); },
    .memcpy = [](void* d, const void* s, size_t n, rtMemcpyKind k) {
      return E(orMemcpy(d, s, n, K(k)));
    },
    .memcpyAsync = [](void* d, const void* s, size_t n, rtMemcpyKind k, rtStream_t st) {
      return E(orMemcpyAsync(d, s, n, K(k), S(st)));
    },
    .memset = [](void* p, int v, size_t n) { return E(orMemset(p, v, n)); },
    .memsetAsync = [](void* p, int v, size_t n, rtStream_t s) {
      return E(orMemsetAsync(p, v, n, S(s)));
    },
    .pointerGetAttributes = [](rtPointerAttributes* a, const void* p) {
      return E(orPointerGetAttributes(reinterpret_cast<orPointerAttributes*>(a), p));
    },
    .memGetInfo = [](size_t* f, size_t* t) { return E(orMemGetInfo(f, t)); },
    .streamCreate = [](rtStream_t* s) {
      return E(orStreamCreate(reinterpret_cast<orStream_t*>(s)));
    },
    .streamCreateWithPriority = [](rtStream_t* s, unsigned int flags, int prio) {
      return E(orStreamCreateWithPriority(reinterpret_cast<orStream_t*>(s), flags, prio));
    },
    .streamDestroy = [](rtStream_t s) { return E(orStreamDestroy(S(s))); },
    .streamSynchronize = [](rtStream_t s) { return E(orStreamSynchronize(S(s))); },
    .streamQuery = [](rtStream_t s) { return E(orStreamQuery(S(s))); },
    .streamWaitEvent = [](rtStream_t s, rtEvent_t e, unsigned int f) {
      return E(orStreamWaitEvent(S(s), V(e), f));
    },
    .streamGetPriority = [](rtStream_t s, int* p) { return E(orStreamGetPriority(S(s), p)); },
    .streamGetDevice = [](rtStream_t s, int* d) { return E(orStreamGetDevice(S(s), d)); },
    .streamGetId = [](rtStream_t s, unsigned long long* id) { return E(orStreamGetId(S(s), id)); },
    .deviceGetStreamPriorityRange = [](int* l, int* g) {
      return E(orDeviceGetStreamPriorityRange(l, g));
    },
    .deviceGetDefaultStream = [](int d, rtStream_t* s) {
      return E(orDeviceGetDefaultStream(d, reinterpret_cast<orStream_t*>(s)));
    },
    .launchKernel = [](rtStream_t s, rtHostFn_t fn, void* u) { return E(orLaunchKernel(S(s), fn, u)); },
    .launchHostFunc = [](rtStream_t s, rtHostFn_t fn, void* u) {
      return E(orLaunchHostFunc(S(s), fn, u));
    },
    .eventCreate = [](rtEvent_t* e) { return E(orEventCreate(reinterpret_cast<orEvent_t*>(e))); },
    .eventCreateWithFlags = [](rtEvent_t* e, unsigned int f) {
      return E(orEventCreateWithFlags(reinterpret_cast<orEvent_t*>(e), f));
    },
    .eventDestroy = [](rtEvent_t e) { return E(orEventDestroy(V(e))); },
    .eventRecord = [](rtEvent_t e, rtStream_t s) { return E(orEventRecord(V(e), S(s))); },
    .eventQuery = [](rtEvent_t e) { return E(orEventQuery(V(e))); },
    .eventSynchronize = [](rtEvent_t e) { return E(orEventSynchronize(V(e))); },
    .eventElapsedTime = [](float* ms, rtEvent_t a, rtEvent_t b) {
      return E(orEventElapsedTime(ms, V(a), V(b)));
    },
    .activityEnable = [](int on) { return E(orActivityEnable(on)); },
    .activityPushCorrelationId = [](unsigned long long id) {
      return E(orActivityPushCorrelationId(id));
    },
    .activityPopCorrelationId = [](unsigned long long* id) {
      return E(orActivityPopCorrelationId(id));
    },
    .activityRead = [](rtActivityRecord* r, size_t cap, size_t* n, unsigned long long* dropped) {
      return E(orActivityRead(reinterpret_cast<orActivityRecord*>(r), cap, n, dropped));
    },
};

}  // namespace

const RuntimeApi& openreg_runtime() {
  return kOpenReg;
}

}  // namespace openreg::rt
