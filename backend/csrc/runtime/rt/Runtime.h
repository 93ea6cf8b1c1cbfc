// The runtime interface: everything libtorch_openreg's upper layer (runtime/,
// aten/, profiler/, distributed/, the bindings) asks of a device runtime.
//
// The upper layer is device-agnostic: it includes this header, never a
// runtime's own header, and calls the rt* functions below. Two runtimes
// implement the interface (rt/RuntimeOpenReg.cpp: the emulated openreg
// runtime; rt/RuntimeShmReg.cpp: shmreg, whose device memory lives in a server
// process). One is chosen per process, at the first call, by
// TORCH_OPENREG_RUNTIME (default "openreg"); see docs/runtimes.md.
//
// The shape is the CUDA runtime's (and openreg's, which mirrors it) so that a
// third runtime with a CUDA-like C API fills the table with thin adapters.
#pragma once

#include <stddef.h>
#include <stdint.h>

// [runtime-interface]
// Error codes every runtime maps its own errors onto.
enum rtError_t : int {
  rtSuccess = 0,
  rtErrorInvalidValue = 1,
  rtErrorMemoryAllocation = 2,
  rtErrorInvalidDevice = 3,
  rtErrorInvalidResourceHandle = 4,  // unknown/destroyed stream or event
  rtErrorNotReady = 5,               // query on unfinished work
  rtErrorInvalidMemcpyDirection = 6,
  rtErrorInvalidDevicePointer = 7,
  rtErrorInitializationError = 8,    // used in a child forked after initialisation
  rtErrorLaunchFailure = 9,
  rtErrorRuntimeUnloading = 10,
  rtErrorNotPermitted = 11,
  rtErrorNotSupported = 12,          // this runtime lacks the feature (e.g. tracing)
  rtErrorDeviceUnavailable = 13,     // the device is gone (shmreg: its server process exited)
  rtErrorUnknown = 999,
};

enum rtMemcpyKind : int {
  rtMemcpyHostToHost = 0,
  rtMemcpyHostToDevice = 1,
  rtMemcpyDeviceToHost = 2,
  rtMemcpyDeviceToDevice = 3,
  rtMemcpyDefault = 4,  // inferred from the pointers
};

enum rtMemoryType : int {
  rtMemoryTypeUnregistered = 0,  // host memory unknown to the runtime
  rtMemoryTypeHost = 1,          // pinned host memory from rtMallocHost
  rtMemoryTypeDevice = 2,
};

struct rtPointerAttributes {
  rtMemoryType type;
  int device;     // -1 for host memory
  void* pointer;
  void* base;     // start of the allocation containing it (NULL if unknown)
  size_t size;    // size of that allocation (0 if unknown)
};

// Opaque handles; a null stream is the current device's default stream.
typedef struct rtStream_st* rtStream_t;
typedef struct rtEvent_st* rtEvent_t;

constexpr unsigned int rtStreamDefault = 0x0u;
constexpr unsigned int rtEventDefault = 0x0u;
constexpr unsigned int rtEventDisableTiming = 0x2u;

// Activity tracing for the profiler (a runtime may answer rtErrorNotSupported).
enum rtActivityKind : int {
  rtActivityKindKernel = 1,
  rtActivityKindMemcpy = 2,
  rtActivityKindMemset = 3,
  rtActivityKindMalloc = 4,
  rtActivityKindFree = 5,
};

struct rtActivityRecord {
  rtActivityKind kind;
  int device;
  unsigned long long stream_id;
  long long start_ns;
  long long end_ns;
  unsigned long long correlation_id;
  size_t bytes;
  rtMemcpyKind copy_kind;
  unsigned long long id;
  long long submit_ns;
  int submit_thread;
};

typedef void (*rtHostFn_t)(void* user_data);

// One runtime: a table of entry points with the semantics of the CUDA runtime
// call of the same name (as openreg.h documents them).
struct RuntimeApi {
  const char* name;  // "openreg", "shmreg": also the torch device name
  const char* (*getErrorString)(rtError_t);
  const char* (*getErrorName)(rtError_t);
  // devices
  rtError_t (*getDeviceCount)(int* count);
  rtError_t (*setDevice)(int device);
  rtError_t (*getDevice)(int* device);
  rtError_t (*deviceSynchronize)();
  // memory
  rtError_t (*malloc)(void** dev_ptr, size_t size);
  rtError_t (*free)(void* dev_ptr);
  rtError_t (*mallocHost)(void** host_ptr, size_t size);
  rtError_t (*freeHost)(void* host_ptr);
  rtError_t (*memcpy)(void* dst, const void* src, size_t n, rtMemcpyKind kind);
  rtError_t (*memcpyAsync)(void* dst, const void* src, size_t n, rtMemcpyKind kind, rtStream_t s);
  rtError_t (*memset)(void* dev_ptr, int value, size_t n);
  rtError_t (*memsetAsync)(void* dev_ptr, int value, size_t n, rtStream_t s);
  rtError_t (*pointerGetAttributes)(rtPointerAttributes* attributes, const void* ptr);
  rtError_t (*memGetInfo)(size_t* free_bytes, size_t* total_bytes);
  // streams
  rtError_t (*streamCreate)(rtStream_t* s);
  rtError_t (*streamCreateWithPriority)(rtStream_t* s, unsigned int flags, int priority);
  rtError_t (*streamDestroy)(rtStream_t s);
  rtError_t (*streamSynchronize)(rtStream_t s);
  rtError_t (*streamQuery)(rtStream_t s);
  rtError_t (*streamWaitEvent)(rtStream_t s, rtEvent_t e, unsigned int flags);
  rtError_t (*streamGetPriority)(rtStream_t s, int* priority);
  rtError_t (*streamGetDevice)(rtStream_t s, int* device);
  rtError_t (*streamGetId)(rtStream_t s, unsigned long long* id);
  rtError_t (*deviceGetStreamPriorityRange)(int* least, int* greatest);
  rtError_t (*deviceGetDefaultStream)(int device, rtStream_t* s);
  // work: a kernel may touch device memory, a host function may not
  rtError_t (*launchKernel)(rtStream_t s, rtHostFn_t fn, void* user_data);
  rtError_t (*launchHostFunc)(rtStream_t s, rtHostFn_t fn, void* user_data);
  // events
  rtError_t (*eventCreate)(rtEvent_t* e);
  rtError_t (*eventCreateWithFlags)(rtEvent_t* e, unsigned int flags);
  rtError_t (*eventDestroy)(rtEvent_t e);
  rtError_t (*eventRecord)(rtEvent_t e, rtStream_t s);
  rtError_t (*eventQuery)(rtEvent_t e);
  rtError_t (*eventSynchronize)(rtEvent_t e);
  rtError_t (*eventElapsedTime)(float* ms, rtEvent_t start, rtEvent_t end);
  // activity tracing
  rtError_t (*activityEnable)(int enable);
  rtError_t (*activityPushCorrelationId)(unsigned long long id);
  rtError_t (*activityPopCorrelationId)(unsigned long long* id);
  rtError_t (*activityRead)(rtActivityRecord* records, size_t capacity, size_t* count,
                            unsigned long long* dropped);
};

namespace openreg::rt {
// The runtime of this process, chosen on first use from TORCH_OPENREG_RUNTIME.
const RuntimeApi& api();
// The runtimes linked into this build (each defined by its rt/Runtime*.cpp).
const RuntimeApi& openreg_runtime();
const RuntimeApi& shmreg_runtime();
}  // namespace openreg::rt
// [/runtime-interface]

// CUDA-style spellings of the table's entries, so upper-layer code reads like
// a CUDA integration's (rtMalloc where CUDA code says cudaMalloc).
#define OPENREG_RT_FORWARD(name, member)                              \
  template <typename... Args>                                         \
  inline auto name(Args... args) {                                    \
    return ::openreg::rt::api().member(args...);                      \
  }
OPENREG_RT_FORWARD(rtGetErrorString, getErrorString)
OPENREG_RT_FORWARD(rtGetErrorName, getErrorName)
OPENREG_RT_FORWARD(rtGetDeviceCount, getDeviceCount)
OPENREG_RT_FORWARD(rtSetDevice, setDevice)
OPENREG_RT_FORWARD(rtGetDevice, getDevice)
OPENREG_RT_FORWARD(rtDeviceSynchronize, deviceSynchronize)
OPENREG_RT_FORWARD(rtMalloc, malloc)
OPENREG_RT_FORWARD(rtFree, free)
OPENREG_RT_FORWARD(rtMallocHost, mallocHost)
OPENREG_RT_FORWARD(rtFreeHost, freeHost)
OPENREG_RT_FORWARD(rtMemcpy, memcpy)
OPENREG_RT_FORWARD(rtMemcpyAsync, memcpyAsync)
OPENREG_RT_FORWARD(rtMemset, memset)
OPENREG_RT_FORWARD(rtMemsetAsync, memsetAsync)
OPENREG_RT_FORWARD(rtPointerGetAttributes, pointerGetAttributes)
OPENREG_RT_FORWARD(rtMemGetInfo, memGetInfo)
OPENREG_RT_FORWARD(rtStreamCreate, streamCreate)
OPENREG_RT_FORWARD(rtStreamCreateWithPriority, streamCreateWithPriority)
OPENREG_RT_FORWARD(rtStreamDestroy, streamDestroy)
OPENREG_RT_FORWARD(rtStreamSynchronize, streamSynchronize)
OPENREG_RT_FORWARD(rtStreamQuery, streamQuery)
OPENREG_RT_FORWARD(rtStreamWaitEvent, streamWaitEvent)
OPENREG_RT_FORWARD(rtStreamGetPriority, streamGetPriority)
OPENREG_RT_FORWARD(rtStreamGetDevice, streamGetDevice)
OPENREG_RT_FORWARD(rtStreamGetId, streamGetId)
OPENREG_RT_FORWARD(rtDeviceGetStreamPriorityRange, deviceGetStreamPriorityRange)
OPENREG_RT_FORWARD(rtDeviceGetDefaultStream, deviceGetDefaultStream)
OPENREG_RT_FORWARD(rtLaunchKernel, launchKernel)
OPENREG_RT_FORWARD(rtLaunchHostFunc, launchHostFunc)
OPENREG_RT_FORWARD(rtEventCreate, eventCreate)
OPENREG_RT_FORWARD(rtEventCreateWithFlags, eventCreateWithFlags)
OPENREG_RT_FORWARD(rtEventDestroy, eventDestroy)
OPENREG_RT_FORWARD(rtEventRecord, eventRecord)
OPENREG_RT_FORWARD(rtEventQuery, eventQuery)
OPENREG_RT_FORWARD(rtEventSynchronize, eventSynchronize)
OPENREG_RT_FORWARD(rtEventElapsedTime, eventElapsedTime)
OPENREG_RT_FORWARD(rtActivityEnable, activityEnable)
OPENREG_RT_FORWARD(rtActivityPushCorrelationId, activityPushCorrelationId)
OPENREG_RT_FORWARD(rtActivityPopCorrelationId, activityPopCorrelationId)
OPENREG_RT_FORWARD(rtActivityRead, activityRead)
#undef OPENREG_RT_FORWARD
