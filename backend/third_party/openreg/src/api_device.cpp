// C entry points: devices.
#include "config.h"
#include "openreg.h"
#include "runtime.h"
#include "thread_state.h"

using namespace openreg;

extern "C" {

orError_t orGetDeviceCount(int* count) {
  if (count == nullptr) return orErrorInvalidValue;
  // Deliberately not api_call(): the count needs no runtime state, so it also answers
  // in a forked child (e.g. to decide whether a device is present at all).
  *count = config().device_count;
  return orSuccess;
}

orError_t orSetDevice(int device) {
  return api_call([&]() -> orError_t {
    if (!Runtime::get().valid_device(device)) return orErrorInvalidDevice;
    current_device() = device;
    return orSuccess;
  });
}

orError_t orGetDevice(int* device) {
  return api_call([&]() -> orError_t {
    if (device == nullptr) return orErrorInvalidValue;
    if (Runtime::get().device_count() == 0) return orErrorInvalidDevice;
    *device = current_device();
    return orSuccess;
  });
}

orError_t orDeviceSynchronize(void) {
  return api_call([&]() -> orError_t {
    Runtime& rt = Runtime::get();
    const int device = current_device();
    if (!rt.valid_device(device)) return orErrorInvalidDevice;
    return wait_streams(rt.streams_on(device), SyncKind::Explicit);
  });
}

}  // extern "C"
