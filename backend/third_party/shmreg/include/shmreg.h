/*
 * libshmreg: a second device runtime for torch_openreg, whose device memory
 * lives in another process.
 *
 * The first call starts `shmreg-server` (next to libshmreg.so, or $SHMREG_SERVER)
 * and connects to it over a unix socket pair. The server owns the device
 * memory, one memfd holding every device's memory, and its bookkeeping:
 * allocation, free, memset, "which allocation holds this pointer", usage. The
 * client maps the memfd it is sent, so kernels and copies run in the client on
 * the same pages the server sees; streams and events are client threads.
 *
 * Differences from openreg a user can notice
 *  - Device memory is readable from host code (it is a shared mapping, not
 *    guarded); only the runtime's own calls know which pointers are device ones.
 *  - A child forked after the first call cannot use the runtime (it would share
 *    the parent's connection): every call there returns
 *    shmErrorInitializationError. Children forked before are independent.
 *  - If the server dies, calls that need it return shmErrorServerGone; memory
 *    already mapped stays readable, nothing hangs.
 *  - Sizes: SHMREG_DEVICE_COUNT (default 2) devices of SHMREG_DEVICE_MEMORY
 *    bytes (default 16 GiB, sparse); OPENREG_DEVICE_COUNT/_MEMORY are honoured
 *    when the SHMREG_ ones are unset, so a torch_openreg user's knobs carry over.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMREG_EXPORT __attribute__((visibility("default")))

typedef enum shmError_t {
  shmSuccess = 0,
  shmErrorInvalidValue = 1,
  shmErrorMemoryAllocation = 2,
  shmErrorInvalidDevice = 3,
  shmErrorInvalidResourceHandle = 4,
  shmErrorNotReady = 5,
  shmErrorInvalidDevicePointer = 7,
  shmErrorInitializationError = 8, /* forked after init, or the server could not start */
  shmErrorNotPermitted = 11,       /* a stream's own work waiting for that stream */
  shmErrorServerGone = 13,         /* the server process exited */
} shmError_t;

typedef struct shmStream_st* shmStream_t; /* NULL = the current device's default stream */
typedef struct shmEvent_st* shmEvent_t;
typedef void (*shmHostFn_t)(void* user_data);

SHMREG_EXPORT const char* shmGetErrorString(shmError_t error);
SHMREG_EXPORT const char* shmGetErrorName(shmError_t error);

/* Devices (the current device is per host thread, initially 0) */
SHMREG_EXPORT shmError_t shmGetDeviceCount(int* count);
SHMREG_EXPORT shmError_t shmSetDevice(int device);
SHMREG_EXPORT shmError_t shmGetDevice(int* device);
SHMREG_EXPORT shmError_t shmDeviceSynchronize(void);
SHMREG_EXPORT shmError_t shmServerPid(pid_t* pid); /* starts the server if needed */

/* Memory. Device pointers are addresses in the client's mapping of the memfd. */
SHMREG_EXPORT shmError_t shmMalloc(void** dev_ptr, size_t size); /* size 0: NULL, success */
SHMREG_EXPORT shmError_t shmFree(void* dev_ptr);
SHMREG_EXPORT shmError_t shmMallocHost(void** host_ptr, size_t size);
SHMREG_EXPORT shmError_t shmFreeHost(void* host_ptr);
/* Copies between any host/device pointers; synchronous ones first wait for the
 * default streams of the devices involved (as CUDA's legacy stream). */
SHMREG_EXPORT shmError_t shmMemcpy(void* dst, const void* src, size_t count);
SHMREG_EXPORT shmError_t shmMemcpyAsync(void* dst, const void* src, size_t count, shmStream_t stream);
/* Memsets are done by the server, in its own mapping. */
SHMREG_EXPORT shmError_t shmMemset(void* dev_ptr, int value, size_t count);
SHMREG_EXPORT shmError_t shmMemsetAsync(void* dev_ptr, int value, size_t count, shmStream_t stream);
/* kind: 0 unknown host memory, 1 pinned host (shmMallocHost), 2 device. */
SHMREG_EXPORT shmError_t shmPointerGetInfo(const void* ptr, int* kind, int* device, void** base,
                                           size_t* size);
SHMREG_EXPORT shmError_t shmMemGetInfo(size_t* free_bytes, size_t* total_bytes);

/* Streams: one worker thread each. Priorities in [-1, 0], lower = higher. */
SHMREG_EXPORT shmError_t shmStreamCreate(shmStream_t* stream, int priority);
SHMREG_EXPORT shmError_t shmStreamDestroy(shmStream_t stream);
SHMREG_EXPORT shmError_t shmStreamSynchronize(shmStream_t stream);
SHMREG_EXPORT shmError_t shmStreamQuery(shmStream_t stream);
SHMREG_EXPORT shmError_t shmStreamWaitEvent(shmStream_t stream, shmEvent_t event);
SHMREG_EXPORT shmError_t shmStreamGetPriority(shmStream_t stream, int* priority);
SHMREG_EXPORT shmError_t shmStreamGetDevice(shmStream_t stream, int* device);
SHMREG_EXPORT shmError_t shmStreamGetId(shmStream_t stream, unsigned long long* id);
SHMREG_EXPORT shmError_t shmDeviceGetDefaultStream(int device, shmStream_t* stream);
SHMREG_EXPORT shmError_t shmLaunch(shmStream_t stream, shmHostFn_t fn, void* user_data);

/* Events */
SHMREG_EXPORT shmError_t shmEventCreate(shmEvent_t* event, int timing);
SHMREG_EXPORT shmError_t shmEventDestroy(shmEvent_t event);
SHMREG_EXPORT shmError_t shmEventRecord(shmEvent_t event, shmStream_t stream);
SHMREG_EXPORT shmError_t shmEventQuery(shmEvent_t event);
SHMREG_EXPORT shmError_t shmEventSynchronize(shmEvent_t event);
SHMREG_EXPORT shmError_t shmEventElapsedTime(float* ms, shmEvent_t start, shmEvent_t end);

#ifdef __cplusplus
}
#endif
