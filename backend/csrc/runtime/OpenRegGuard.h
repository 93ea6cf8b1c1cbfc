// DeviceGuardImplInterface for PrivateUse1: devices, streams, events.
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "compat/TorchVersion.h"

namespace openreg {

struct OpenRegGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  OpenRegGuardImpl() = default;
  explicit OpenRegGuardImpl(c10::DeviceType t);

  c10::DeviceType type() const override;
  c10::Device exchangeDevice(c10::Device d) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device d) const override;
  void uncheckedSetDevice(c10::Device d) const noexcept override;
  c10::DeviceIndex deviceCount() const noexcept override;

  c10::Stream getStream(c10::Device d) const override;
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override;
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
#if OPENREG_TORCH_VERSION_AT_LEAST(2, 11)
  // COMPAT(>= 2.11): DeviceGuardImplInterface::getStreamNativeHandle, behind
  // c10::Stream::native_handle() / torch.Stream.native_handle (PR #171040).
  // CAN REMOVE the #if when MIN_SUPPORTED >= 2.11.
  void* getStreamNativeHandle(const c10::Stream s) const override;
#endif
#if OPENREG_TORCH_VERSION_AT_LEAST(2, 10)
  // COMPAT(>= 2.10): DeviceGuardImplInterface::getDeviceCapability, behind
  // torch.accelerator.get_device_capability (PR #165631).
  // CAN REMOVE the #if when MIN_SUPPORTED >= 2.10.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override;
#endif
  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;

  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override;
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex device_index) const override;

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override;
};

} // namespace openreg
