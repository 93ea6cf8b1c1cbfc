// fill_ and device-to-device copy_ (with dtype conversion, broadcasting and
// arbitrary strides) as native kernels.

#include "aten/launch/Elementwise.h"
#include "aten/native/OpSupport.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/zero_ops.h>

namespace openreg::native {
namespace {

using at::Tensor;

void launch_fill(const Tensor& self, const c10::Scalar& value) {
  // Fill may write through expanded (self-overlapping) views, as on CPU.
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(self)
                  .build();
  OPENREG_DISPATCH_NATIVE_TYPES(self.scalar_type(), "openreg_fill", [&] {
    // Converted on the host: an out-of-range value raises here, not in the kernel.
    const scalar_t v = value.to<scalar_t>();
    launch_elementwise<scalar_t>(iter, [v]() { return v; });
  });
}

} // namespace

Tensor& OpenRegNativeFunctions::fill_(Tensor& self, const c10::Scalar& value) {
  if (!native_kernels_enabled() || !is_native_tensor(self) || value.isComplex()) {
    return cpu_fallback_op<at::_ops::fill__Scalar>(self, value);
  }
  launch_fill(self, value);
  return self;
}

Tensor& OpenRegNativeFunctions::fill_(Tensor& self, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (value.device().is_cpu()) {
    return fill_(self, value.item());
  }
  if (!native_kernels_enabled()) {
    return cpu_fallback_op<at::_ops::fill__Tensor>(self, value);
  }
  // A device scalar stays on the device: a broadcasting copy, no host round trip.
  return self.copy_(value);
}

Tensor& OpenRegNativeFunctions::zero_(Tensor& self) {
  if (!native_kernels_enabled() || !is_native_tensor(self)) {
    return cpu_fallback_op<at::_ops::zero_>(self);
  }
  launch_fill(self, 0);
  return self;
}

// [native-copy]
Tensor& OpenRegNativeFunctions::copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  const bool native = native_kernels_enabled() && is_native_tensor(self) && is_native_tensor(src) &&
      self.device() == src.device();
  if (!native) {
    // Host<->device and cross-device copies, and the switched-off mode:
    // ATen's composite copy_ redispatches to the runtime's _copy_from.
    return at::native::copy_(self, src, non_blocking);
  }
  if (self.is_same(src) || self.numel() == 0) {
    return self;
  }
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(self)
                  .add_const_input(src)
                  .build();
  OPENREG_DISPATCH_NATIVE_TYPES(self.scalar_type(), "openreg_copy_out", [&] {
    using out_t = scalar_t;
    OPENREG_DISPATCH_NATIVE_TYPES(src.scalar_type(), "openreg_copy_in", [&] {
      launch_elementwise<out_t, scalar_t>(iter, [](scalar_t x) { return static_cast<out_t>(x); });
    });
  });
  return self;
}
// [/native-copy]

} // namespace openreg::native
