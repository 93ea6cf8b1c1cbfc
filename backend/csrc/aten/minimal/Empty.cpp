#include "aten/minimal/Minimal.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorOptions.h>

#include "runtime/OpenRegFunctions.h"

namespace openreg::native {

void check_supported_dtype(c10::ScalarType dtype) {
  // Quantized tensors need a Quantizer and quantized kernels; bit-packed types
  // have no arithmetic at all. Neither exists for openreg.
  const bool supported = !c10::isQIntType(dtype) && !c10::isBitsType(dtype);
  TORCH_CHECK_TYPE(supported, "openreg does not support tensors of dtype ", dtype);
}

namespace {
c10::Device checked_device(std::optional<c10::Device> device_opt,
                           std::optional<c10::Layout> layout_opt,
                           std::optional<bool> pin_memory_opt,
                           c10::ScalarType dtype) {
  auto device = c10::device_or_default(device_opt);
  TORCH_INTERNAL_ASSERT(device.is_privateuseone());
  TORCH_CHECK(c10::layout_or_default(layout_opt) == c10::Layout::Strided,
              "openreg supports only strided tensors, got layout ", c10::layout_or_default(layout_opt));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory_opt),
              "Only CPU tensors can be pinned; got pin_memory=True for ", device);
  check_supported_dtype(dtype);
  if (!device.has_index()) {
    device = c10::Device(device.type(), current_device());
  }
  check_device_index(device.index());
  return device;
}
} // namespace

// [empty]
at::Tensor OpenRegNativeFunctions::empty(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype_opt,
    std::optional<c10::Layout> layout_opt, std::optional<c10::Device> device_opt,
    std::optional<bool> pin_memory_opt, std::optional<c10::MemoryFormat> memory_format_opt) {
  const auto dtype = c10::dtype_or_default(dtype_opt);
  const auto device = checked_device(device_opt, layout_opt, pin_memory_opt, dtype);
  // The allocator allocates on the current device.
  const c10::DeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, c10::GetAllocator(c10::DeviceType::PrivateUse1), ks,
                                   dtype, memory_format_opt);
}
// [/empty]

at::Tensor OpenRegNativeFunctions::empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype_opt,
    std::optional<c10::Layout> layout_opt, std::optional<c10::Device> device_opt,
    std::optional<bool> pin_memory_opt) {
  const auto dtype = c10::dtype_or_default(dtype_opt);
  const auto device = checked_device(device_opt, layout_opt, pin_memory_opt, dtype);
  const c10::DeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(
      size, stride, c10::GetAllocator(c10::DeviceType::PrivateUse1), ks, dtype);
}

} // namespace openreg::native
