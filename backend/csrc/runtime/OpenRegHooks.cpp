// PrivateUse1HooksInterface: what generic PyTorch code (torch.accelerator,
// pin_memory, generators, storage resize) asks a PrivateUse1 backend.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "compat/TorchVersion.h"
#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegGenerator.h"
#include "runtime/OpenRegHostAllocator.h"
#include "runtime/OpenRegStream.h"

namespace openreg {

namespace {

// [hooks]
struct OpenRegHooks final : public at::PrivateUse1HooksInterface {
  // Must not throw and must not initialise a device (AcceleratorHooksInterface).
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }

  // Called by at::globalContext().lazyInitDevice(PrivateUse1).
  void init() const override { lazy_init(); }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    // The emulated runtime has no per-device context beyond process init.
    return is_initialized() && device_index >= 0 && device_index < device_count();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return maybe_exchange_device(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  c10::Device getDeviceFromPtr(void* data) const override {
    rtPointerAttributes attr{};
    OPENREG_CHECK(rtPointerGetAttributes(&attr, data));
    TORCH_CHECK(
        attr.type == rtMemoryTypeDevice,
        "openreg: pointer ", data, " is not openreg device memory");
    return c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attr.device));
  }

  bool isPinnedPtr(const void* data) const override {
    rtPointerAttributes attr{};
    return rtPointerGetAttributes(&attr, data) == rtSuccess && attr.type == rtMemoryTypeHost;
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    lazy_init();
    return host_allocator();
  }

  // Storage.resize_() / untyped_storage().resize_() on an openreg storage.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    const auto device = impl->device().index() >= 0 ? impl->device().index() : current_device();
    const auto previous = exchange_device(device);
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    const size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0) {
      // Ordered on the current stream after whatever produced the old bytes;
      // the old block goes back to the cache of that same stream.
      OPENREG_CHECK(rtMemcpyAsync(fresh.get(), impl->data(), keep,
                                  rtMemcpyDeviceToDevice, getCurrentRawStream(device)));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
    set_device(previous);
  }
};
// [/hooks]

struct RegisterHooks {
  RegisterHooks() {
    static OpenRegHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} register_hooks;

} // namespace

} // namespace openreg
