#include "runtime/OpenRegGuard.h"

#include "compat/TorchVersion.h"
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"

namespace openreg {

namespace {
c10::Device pu1(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

// Events are created lazily at the first record(), on the recording stream's
// device, because c10::Event only learns its stream then.
rtEvent_t create_event(c10::DeviceIndex device, c10::EventFlag flag) {
  const auto previous = exchange_device(device);
  rtEvent_t event = nullptr;
  // PYTORCH_DEFAULT means "no timing" (cheaper), as for CUDA.
  const unsigned flags =
      flag == c10::EventFlag::BACKEND_DEFAULT ? rtEventDefault : rtEventDisableTiming;
  const rtError_t err = rtEventCreateWithFlags(&event, flags);
  set_device(previous);
  OPENREG_CHECK(err);
  return event;
}
} // namespace

OpenRegGuardImpl::OpenRegGuardImpl(c10::DeviceType t) {
  TORCH_INTERNAL_ASSERT(t == static_type);
}

// [guard]
c10::DeviceType OpenRegGuardImpl::type() const {
  return static_type;
}

c10::Device OpenRegGuardImpl::exchangeDevice(c10::Device d) const {
  TORCH_CHECK(d.is_privateuseone(), "expected an openreg device, got ", d);
  return pu1(exchange_device(d.index()));
}

c10::Device OpenRegGuardImpl::getDevice() const {
  return pu1(current_device());
}

void OpenRegGuardImpl::setDevice(c10::Device d) const {
  TORCH_CHECK(d.is_privateuseone(), "expected an openreg device, got ", d);
  set_device(d.index());
}

void OpenRegGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  // Called from guard destructors while restoring: must not throw.
  (void)rtSetDevice(d.index());
}

c10::DeviceIndex OpenRegGuardImpl::deviceCount() const noexcept {
  return device_count();
}
// [/guard]

// [guard-streams]
c10::Stream OpenRegGuardImpl::getStream(c10::Device d) const {
  return getCurrentStream(d.index()).unwrap();
}

c10::Stream OpenRegGuardImpl::getDefaultStream(c10::Device d) const {
  return openreg::getDefaultStream(d.index()).unwrap();
}

c10::Stream OpenRegGuardImpl::getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const {
  return getStreamFromPool(isHighPriority, d.index()).unwrap();
}

c10::Stream OpenRegGuardImpl::getNewStream(c10::Device d, int priority) const {
  return getStreamFromPool(priority, d.index()).unwrap();
}

c10::Stream OpenRegGuardImpl::exchangeStream(c10::Stream s) const {
  const OpenRegStream next(s);
  const auto previous = getCurrentStream(s.device_index());
  setCurrentStream(next);
  return previous.unwrap();
}

#if OPENREG_TORCH_VERSION_AT_LEAST(2, 11)
// COMPAT(>= 2.11): see OpenRegGuard.h (PR #171040). CAN REMOVE the #if when MIN_SUPPORTED >= 2.11.
void* OpenRegGuardImpl::getStreamNativeHandle(const c10::Stream s) const {
  return OpenRegStream(s).raw();
}
#endif

#if OPENREG_TORCH_VERSION_AT_LEAST(2, 10)
// COMPAT(>= 2.10): see OpenRegGuard.h (PR #165631). CAN REMOVE the #if when MIN_SUPPORTED >= 2.10.
// [device-capability]
// Every dtype CPU has: device memory is host memory, so any dtype allocates
// and converts (ops without a native kernel take the CPU fallback).
c10::DeviceCapability OpenRegGuardImpl::getDeviceCapability(c10::Device d) const {
  check_device_index(d.index());
  return c10::DeviceCapability();
}
// [/device-capability]
#endif

bool OpenRegGuardImpl::queryStream(const c10::Stream& stream) const {
  return OpenRegStream(stream).query();
}

void OpenRegGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  OpenRegStream(stream).synchronize();
}

void OpenRegGuardImpl::synchronizeDevice(const c10::DeviceIndex device_index) const {
  const auto device = device_index < 0 ? current_device() : device_index;
  const auto previous = exchange_device(device);
  const rtError_t err = rtDeviceSynchronize();
  set_device(previous);
  OPENREG_CHECK(err);
}
// [/guard-streams]

// [guard-events]
void OpenRegGuardImpl::destroyEvent(void* event, const c10::DeviceIndex) const noexcept {
  if (event != nullptr) {
    OPENREG_WARN(rtEventDestroy(static_cast<rtEvent_t>(event)));
  }
}

void OpenRegGuardImpl::record(void** event, const c10::Stream& stream,
                              const c10::DeviceIndex device_index,
                              const c10::EventFlag flag) const {
  TORCH_CHECK(
      device_index == -1 || device_index == stream.device_index(),
      "Event device index ", static_cast<int>(device_index),
      " does not match recording stream's device index ",
      static_cast<int>(stream.device_index()), ".");
  if (*event == nullptr) {
    *event = create_event(stream.device_index(), flag);
  }
  OPENREG_CHECK(rtEventRecord(static_cast<rtEvent_t>(*event), OpenRegStream(stream).raw()));
}

void OpenRegGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) {
    return; // never recorded: nothing to wait for (c10::Event semantics)
  }
  OPENREG_CHECK(rtStreamWaitEvent(OpenRegStream(stream).raw(), static_cast<rtEvent_t>(event), 0));
}

bool OpenRegGuardImpl::queryEvent(void* event) const {
  if (event == nullptr) {
    return true;
  }
  const rtError_t err = rtEventQuery(static_cast<rtEvent_t>(event));
  if (err == rtErrorNotReady) {
    return false;
  }
  OPENREG_CHECK(err);
  return true;
}

void OpenRegGuardImpl::synchronizeEvent(void* event) const {
  if (event != nullptr) {
    OPENREG_CHECK(rtEventSynchronize(static_cast<rtEvent_t>(event)));
  }
}

double OpenRegGuardImpl::elapsedTime(void* event1, void* event2,
                                     const c10::DeviceIndex) const {
  TORCH_CHECK(
      event1 != nullptr && event2 != nullptr,
      "Both events must be recorded before calculating elapsed time.");
  float ms = 0;
  OPENREG_CHECK(rtEventElapsedTime(&ms, static_cast<rtEvent_t>(event1),
                                   static_cast<rtEvent_t>(event2)));
  return ms;
}
// [/guard-events]

void OpenRegGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                                             const c10::Stream& stream) const {
  device_allocator().recordStream(data_ptr, stream);
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, OpenRegGuardImpl);

} // namespace openreg
