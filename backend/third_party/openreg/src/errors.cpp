// Names and messages of orError_t, kept next to each other so a new code cannot get
// one without the other.
#include "openreg.h"

namespace {

struct ErrorText {
  orError_t code;
  const char* name;
  const char* message;
};

constexpr ErrorText kErrors[] = {
    {orSuccess, "orSuccess", "no error"},
    {orErrorInvalidValue, "orErrorInvalidValue", "invalid argument"},
    {orErrorMemoryAllocation, "orErrorMemoryAllocation", "out of memory"},
    {orErrorInvalidDevice, "orErrorInvalidDevice", "invalid device ordinal"},
    {orErrorInvalidResourceHandle, "orErrorInvalidResourceHandle",
     "invalid resource handle (unknown or destroyed stream/event, or an event without timing)"},
    {orErrorNotReady, "orErrorNotReady", "device not ready"},
    {orErrorInvalidMemcpyDirection, "orErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {orErrorInvalidDevicePointer, "orErrorInvalidDevicePointer", "invalid device pointer"},
    {orErrorInitializationError, "orErrorInitializationError",
     "initialization error: the openreg runtime cannot be used in a process forked after it "
     "was initialised (worker threads do not survive fork)"},
    {orErrorLaunchFailure, "orErrorLaunchFailure",
     "unspecified launch failure: a kernel or host function threw an exception"},
    {orErrorRuntimeUnloading, "orErrorRuntimeUnloading",
     "openreg runtime is shutting down (process exit in progress)"},
    {orErrorNotPermitted, "orErrorNotPermitted",
     "operation not permitted (a stream's own work cannot wait for that stream)"},
    {orErrorUnknown, "orErrorUnknown", "unknown error"},
};

const ErrorText* find(orError_t error) {
  for (const auto& e : kErrors) {
    if (e.code == error) return &e;
  }
  return nullptr;
}

}  // namespace

extern "C" {

const char* orGetErrorString(orError_t error) {
  const ErrorText* e = find(error);
  return e ? e->message : "unrecognized error code";
}

const char* orGetErrorName(orError_t error) {
  const ErrorText* e = find(error);
  return e ? e->name : "unrecognized error code";
}

}  // extern "C"
