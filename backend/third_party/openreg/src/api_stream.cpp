// C entry points: streams and work submission.
#include "activity.h"
#include "openreg.h"
#include "runtime.h"
#include "thread_state.h"

using namespace openreg;

namespace {

// CUDA's convention: numerically lower is more urgent; 0 is the default.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -1;

orError_t launch(orStream_t stream, orHostFn_t fn, void* user_data, bool device_access) {
  return api_call([&]() -> orError_t {
    if (fn == nullptr) return orErrorInvalidValue;
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    std::function<void()> work = [fn, user_data] { fn(user_data); };
    // Host callbacks are not device work; only kernels are activities.
    if (device_access) {
      work = activity::timed(std::move(work),
                             activity::make(orActivityKindKernel, s->device, s->id, 0));
    }
    if (s->enqueue({std::move(work), device_access}) == 0) {
      return orErrorRuntimeUnloading;
    }
    return orSuccess;
  });
}

}  // namespace

extern "C" {

orError_t orStreamCreate(orStream_t* stream) {
  return orStreamCreateWithPriority(stream, orStreamDefault, kLeastPriority);
}

orError_t orStreamCreateWithPriority(orStream_t* stream, unsigned int flags, int priority) {
  return api_call([&]() -> orError_t {
    if (stream == nullptr || (flags & ~orStreamNonBlocking) != 0) return orErrorInvalidValue;
    // Out-of-range priorities are clamped, as cudaStreamCreateWithPriority does.
    if (priority > kLeastPriority) priority = kLeastPriority;
    if (priority < kGreatestPriority) priority = kGreatestPriority;
    StreamPtr s;
    if (auto e = Runtime::get().create_stream(current_device(), priority, &s); e != orSuccess) {
      return e;
    }
    *stream = s.get();
    return orSuccess;
  });
}

orError_t orStreamDestroy(orStream_t stream) {
  return api_call([&]() -> orError_t {
    if (stream == nullptr) return orErrorInvalidResourceHandle;
    return Runtime::get().destroy_stream(stream);
  });
}

orError_t orStreamSynchronize(orStream_t stream) {
  return api_call([&]() -> orError_t {
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    return wait_streams({s}, SyncKind::Explicit);
  });
}

orError_t orStreamQuery(orStream_t stream) {
  return api_call([&]() -> orError_t {
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    return s->idle() ? orSuccess : orErrorNotReady;
  });
}

orError_t orStreamGetPriority(orStream_t stream, int* priority) {
  return api_call([&]() -> orError_t {
    if (priority == nullptr) return orErrorInvalidValue;
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    *priority = s->priority;
    return orSuccess;
  });
}

orError_t orStreamGetDevice(orStream_t stream, int* device) {
  return api_call([&]() -> orError_t {
    if (device == nullptr) return orErrorInvalidValue;
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    *device = s->device;
    return orSuccess;
  });
}

orError_t orDeviceGetStreamPriorityRange(int* least_priority, int* greatest_priority) {
  if (least_priority != nullptr) *least_priority = kLeastPriority;
  if (greatest_priority != nullptr) *greatest_priority = kGreatestPriority;
  return orSuccess;
}

orError_t orStreamGetId(orStream_t stream, unsigned long long* id) {
  return api_call([&]() -> orError_t {
    if (id == nullptr) return orErrorInvalidValue;
    StreamPtr s;
    if (auto e = Runtime::get().resolve(stream, &s); e != orSuccess) return e;
    *id = s->id;
    return orSuccess;
  });
}

orError_t orDeviceGetDefaultStream(int device, orStream_t* stream) {
  return api_call([&]() -> orError_t {
    if (stream == nullptr) return orErrorInvalidValue;
    StreamPtr s;
    if (auto e = Runtime::get().default_stream(device, &s); e != orSuccess) return e;
    *stream = s.get();
    return orSuccess;
  });
}

orError_t orLaunchKernel(orStream_t stream, orHostFn_t fn, void* user_data) {
  return launch(stream, fn, user_data, /*device_access=*/true);
}

orError_t orLaunchHostFunc(orStream_t stream, orHostFn_t fn, void* user_data) {
  return launch(stream, fn, user_data, /*device_access=*/false);
}

}  // extern "C"
