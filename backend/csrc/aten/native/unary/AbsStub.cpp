// abs through ATen's DispatchStub: abs.out runs at::native::abs_out, the very
// structured implementation CPU and CUDA use, which builds the TensorIterator
// and calls abs_stub for the iterator's device type; the kernel registered for
// PrivateUse1 below then launches on the device.

#include "aten/launch/Elementwise.h"
#include "aten/native/OpSupport.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/native/UnaryOps.h>
#include <ATen/ops/abs_native.h>
#include <ATen/ops/abs_ops.h>

#include <cmath>
#include <type_traits>

namespace openreg::native {

// [abs-stub]
void abs_kernel(at::TensorIteratorBase& iter) {
  OPENREG_DISPATCH_NATIVE_NUMBERS(iter.common_dtype(), "openreg_abs", [&] {
    launch_elementwise<scalar_t, scalar_t>(iter, [](scalar_t x) {
      if constexpr (std::is_floating_point_v<scalar_t>) {
        return std::abs(x);  // -0.0 -> +0.0, NaN stays NaN
      } else {
        return x < 0 ? scalar_t(-x) : x;
      }
    });
  });
}
// [/abs-stub]

// abs and abs_ are CompositeExplicitAutograd over abs.out.
at::Tensor& OpenRegNativeFunctions::abs_out(const at::Tensor& self, at::Tensor& out) {
  const bool native = native_kernels_enabled() && is_native_tensor(self) && is_native_tensor(out) &&
      self.scalar_type() != c10::kBool && self.scalar_type() == out.scalar_type();
  if (!native) {
    return cpu_fallback_op<at::_ops::abs_out>(self, out);
  }
  return at::native::abs_out(self, out);
}

} // namespace openreg::native

// [abs-stub-registration]
// The macro names ATen's registrar unqualified, so it must expand inside at::native.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(abs_stub, &openreg::native::abs_kernel)
} // namespace at::native
// [/abs-stub-registration]
