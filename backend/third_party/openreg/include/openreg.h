/*
 * libopenreg: a CUDA-runtime-like C API emulated on the CPU.
 *
 * This header is the contract between the emulated "driver" (third_party/openreg)
 * and libtorch_openreg (backend/csrc). It deliberately mirrors the shape of the
 * CUDA runtime so that the integration code in csrc/ reads like a real vendor's.
 *
 * Semantics in brief
 *  - Devices: OPENREG_DEVICE_COUNT (default 2) devices; the current device is
 *    per host thread (like cudaSetDevice), initially 0.
 *  - Device memory lives in per-device arenas that are PROT_NONE except while a
 *    kernel launched with orLaunchKernel runs or while the runtime itself copies,
 *    so host code that dereferences a device pointer by mistake crashes (SIGSEGV).
 *  - Streams: each stream is a worker thread executing its queue in order. The
 *    default (null) stream of a device is a real stream too; operations on it are
 *    ordered like on any other stream (no legacy implicit synchronisation).
 *  - Events: recorded on a stream; timing unless created with orEventDisableTiming.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define OPENREG_EXPORT __declspec(dllexport)
#else
#define OPENREG_EXPORT __attribute__((visibility("default")))
#endif

typedef enum orError_t {
  orSuccess = 0,
  orErrorInvalidValue = 1,
  orErrorMemoryAllocation = 2,
  orErrorInvalidDevice = 3,
  orErrorInvalidResourceHandle = 4, /* unknown/destroyed stream or event */
  orErrorNotReady = 5,              /* query on unfinished work */
  orErrorInvalidMemcpyDirection = 6,/* kind does not match the pointers */
  orErrorInvalidDevicePointer = 7,  /* free/attributes of a foreign pointer */
  orErrorInitializationError = 8,   /* runtime used in a child forked after it was initialised */
  orErrorLaunchFailure = 9,         /* a kernel/host function threw; reported by the next sync */
  orErrorRuntimeUnloading = 10,     /* work submitted after the process began to exit */
  orErrorNotPermitted = 11,         /* e.g. a stream's own work synchronising on that stream */
  orErrorUnknown = 999,
} orError_t;

typedef enum orMemcpyKind {
  orMemcpyHostToHost = 0,
  orMemcpyHostToDevice = 1,
  orMemcpyDeviceToHost = 2,
  orMemcpyDeviceToDevice = 3,
  orMemcpyDefault = 4, /* inferred from the pointers */
} orMemcpyKind;

typedef enum orMemoryType {
  orMemoryTypeUnregistered = 0, /* plain host memory unknown to the runtime */
  orMemoryTypeHost = 1,         /* pinned host memory from orMallocHost */
  orMemoryTypeDevice = 2,
} orMemoryType;

typedef struct orPointerAttributes {
  orMemoryType type;
  int device;        /* -1 for host memory */
  void* pointer;     /* the pointer that was asked about */
  void* base;        /* start of the allocation containing it (NULL if unknown) */
  size_t size;       /* size of that allocation (0 if unknown) */
} orPointerAttributes;

typedef struct orStream_st* orStream_t; /* NULL = the current device's default stream */
typedef struct orEvent_st* orEvent_t;

/* Stream flags (as cudaStreamDefault / cudaStreamNonBlocking). There is no legacy
 * implicit synchronisation, so both behave the same; they are accepted for parity. */
#define orStreamDefault 0x0u
#define orStreamNonBlocking 0x1u

/* Event flags (as cudaEventDefault / cudaEventDisableTiming). */
#define orEventDefault 0x0u
#define orEventDisableTiming 0x2u

/* Errors */
OPENREG_EXPORT const char* orGetErrorString(orError_t error);
OPENREG_EXPORT const char* orGetErrorName(orError_t error);

/* Devices */
OPENREG_EXPORT orError_t orGetDeviceCount(int* count);
OPENREG_EXPORT orError_t orSetDevice(int device);
OPENREG_EXPORT orError_t orGetDevice(int* device);
OPENREG_EXPORT orError_t orDeviceSynchronize(void); /* all streams of the current device */

/* Memory */
OPENREG_EXPORT orError_t orMalloc(void** dev_ptr, size_t size);   /* on the current device */
OPENREG_EXPORT orError_t orFree(void* dev_ptr);                    /* NULL is a no-op */
OPENREG_EXPORT orError_t orMallocHost(void** host_ptr, size_t size); /* pinned host memory */
OPENREG_EXPORT orError_t orFreeHost(void* host_ptr);
OPENREG_EXPORT orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind);
OPENREG_EXPORT orError_t orMemcpyAsync(void* dst, const void* src, size_t count,
                                       orMemcpyKind kind, orStream_t stream);
OPENREG_EXPORT orError_t orMemset(void* dev_ptr, int value, size_t count);
OPENREG_EXPORT orError_t orMemsetAsync(void* dev_ptr, int value, size_t count, orStream_t stream);
OPENREG_EXPORT orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr);
/* Bytes currently held in device arenas (for tests of the caching allocator). */
OPENREG_EXPORT orError_t orMemGetInfo(size_t* free_bytes, size_t* total_bytes);

/* Streams (priority: lower number = higher priority, as in CUDA) */
OPENREG_EXPORT orError_t orStreamCreate(orStream_t* stream);
OPENREG_EXPORT orError_t orStreamCreateWithPriority(orStream_t* stream, unsigned int flags, int priority);
OPENREG_EXPORT orError_t orStreamDestroy(orStream_t stream);
OPENREG_EXPORT orError_t orStreamSynchronize(orStream_t stream);
OPENREG_EXPORT orError_t orStreamQuery(orStream_t stream); /* orSuccess or orErrorNotReady */
OPENREG_EXPORT orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags);
OPENREG_EXPORT orError_t orStreamGetPriority(orStream_t stream, int* priority);
OPENREG_EXPORT orError_t orStreamGetDevice(orStream_t stream, int* device);
OPENREG_EXPORT orError_t orDeviceGetStreamPriorityRange(int* least_priority, int* greatest_priority);
/* The default stream of a device as a real handle (never destroyed). */
OPENREG_EXPORT orError_t orDeviceGetDefaultStream(int device, orStream_t* stream);

/* Work submission: fn(user_data) runs on the stream's worker thread, in order.
 * orLaunchKernel additionally makes device memory accessible while fn runs
 * (a "kernel"); orLaunchHostFunc does not (a host callback, as cudaLaunchHostFunc). */
typedef void (*orHostFn_t)(void* user_data);
OPENREG_EXPORT orError_t orLaunchKernel(orStream_t stream, orHostFn_t fn, void* user_data);
OPENREG_EXPORT orError_t orLaunchHostFunc(orStream_t stream, orHostFn_t fn, void* user_data);

/* Events */
OPENREG_EXPORT orError_t orEventCreate(orEvent_t* event);
OPENREG_EXPORT orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags);
OPENREG_EXPORT orError_t orEventDestroy(orEvent_t event);
OPENREG_EXPORT orError_t orEventRecord(orEvent_t event, orStream_t stream);
OPENREG_EXPORT orError_t orEventQuery(orEvent_t event);       /* orSuccess or orErrorNotReady */
OPENREG_EXPORT orError_t orEventSynchronize(orEvent_t event);
OPENREG_EXPORT orError_t orEventElapsedTime(float* ms, orEvent_t start, orEvent_t end);

/* Activity tracing (for profilers). While enabled, each kernel, copy, memset and
 * device allocation/free appends one record; orActivityRead drains them in the
 * order they completed. Times are CLOCK_REALTIME nanoseconds. The correlation id
 * is the innermost one pushed on the submitting host thread (0 if none). */
typedef enum orActivityKind {
  orActivityKindKernel = 1,
  orActivityKindMemcpy = 2,
  orActivityKindMemset = 3,
  orActivityKindMalloc = 4,
  orActivityKindFree = 5,
} orActivityKind;

typedef struct orActivityRecord {
  orActivityKind kind;
  int device;
  unsigned long long stream_id;      /* orStreamGetId; 0 for synchronous calls */
  long long start_ns;
  long long end_ns;
  unsigned long long correlation_id;
  size_t bytes;                      /* copied, set, allocated or freed */
  orMemcpyKind copy_kind;            /* memcpy only, never orMemcpyDefault */
  unsigned long long id;             /* unique per record, from 1 */
  long long submit_ns;               /* stream work: when the host enqueued it, else 0 */
  int submit_thread;                 /* stream work: the enqueuing host thread (Linux tid) */
} orActivityRecord;

OPENREG_EXPORT orError_t orActivityEnable(int enable); /* enabling discards old records */
OPENREG_EXPORT orError_t orActivityPushCorrelationId(unsigned long long id);
OPENREG_EXPORT orError_t orActivityPopCorrelationId(unsigned long long* id); /* id may be NULL */
/* Moves up to `capacity` records out; `dropped` (may be NULL) counts records lost
 * to a full buffer since tracing was enabled. */
OPENREG_EXPORT orError_t orActivityRead(orActivityRecord* records, size_t capacity, size_t* count,
                                        unsigned long long* dropped);
/* A small integer naming the stream for its whole life (ids are never reused). */
OPENREG_EXPORT orError_t orStreamGetId(orStream_t stream, unsigned long long* id);

#ifdef __cplusplus
} /* extern "C" */
#endif
