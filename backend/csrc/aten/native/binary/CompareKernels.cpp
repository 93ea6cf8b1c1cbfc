#include "aten/native/binary/BinaryKernels.h"
#include "aten/native/OpSupport.h"

namespace openreg::native {

void launch_compare_kernel(BinaryKind kind, c10::ScalarType compute, const at::TensorIteratorBase& iter,
                           const BinaryOperand& a, const BinaryOperand& b) {
  using detail::launch_binary_functor;
  OPENREG_DISPATCH_NATIVE_TYPES(compute, "openreg_compare", [&] {
    using T = scalar_t;
    switch (kind) {
      case BinaryKind::Eq: launch_binary_functor<T>(iter, a, b, [](T x, T y) { return x == y; }); break;
      case BinaryKind::Ne: launch_binary_functor<T>(iter, a, b, [](T x, T y) { return x != y; }); break;
      case BinaryKind::Lt: launch_binary_functor<T>(iter, a, b, [](T x, T y) { return x < y; }); break;
      case BinaryKind::Le: launch_binary_functor<T>(iter, a, b, [](T x, T y) { return x <= y; }); break;
      case BinaryKind::Gt: launch_binary_functor<T>(iter, a, b, [](T x, T y) { return x > y; }); break;
      case BinaryKind::Ge: launch_binary_functor<T>(iter, a, b, [](T x, T y) { return x >= y; }); break;
      default: TORCH_INTERNAL_ASSERT(false, "not a comparison");
    }
  });
}

} // namespace openreg::native
