// [native-kernel]
#include "aten/native/binary/BinaryKernels.h"
#include "aten/native/OpSupport.h"

#include <cmath>
#include <type_traits>

namespace openreg::native {

void launch_arith_kernel(BinaryKind kind, c10::ScalarType compute, const at::TensorIteratorBase& iter,
                         const BinaryOperand& a, const BinaryOperand& b, const c10::Scalar& alpha) {
  using detail::launch_binary_functor;
  switch (kind) {
    case BinaryKind::Add:
    case BinaryKind::Sub:
      OPENREG_DISPATCH_NATIVE_NUMBERS(compute, "openreg_add_sub", [&] {
        // Subtraction is addition of -alpha * other, exactly as ATen does it.
        const scalar_t scale = kind == BinaryKind::Add ? alpha.to<scalar_t>() : -alpha.to<scalar_t>();
        if (scale == scalar_t(1)) {
          launch_binary_functor<scalar_t>(iter, a, b, [](scalar_t x, scalar_t y) { return scalar_t(x + y); });
        } else {
          launch_binary_functor<scalar_t>(iter, a, b, [scale](scalar_t x, scalar_t y) { return scalar_t(x + scale * y); });
        }
      });
      break;
    case BinaryKind::Mul:
      OPENREG_DISPATCH_NATIVE_TYPES(compute, "openreg_mul", [&] {
        launch_binary_functor<scalar_t>(iter, a, b, [](scalar_t x, scalar_t y) { return scalar_t(x * y); });
      });
      break;
    case BinaryKind::Div:
      OPENREG_DISPATCH_NATIVE_FLOATS(compute, "openreg_div", [&] {
        launch_binary_functor<scalar_t>(iter, a, b, [](scalar_t x, scalar_t y) { return scalar_t(x / y); });
      });
      break;
    case BinaryKind::Pow:
      OPENREG_DISPATCH_NATIVE_FLOATS(compute, "openreg_pow", [&] {
        launch_binary_functor<scalar_t>(iter, a, b, [](scalar_t x, scalar_t y) { return scalar_t(std::pow(x, y)); });
      });
      break;
    case BinaryKind::Maximum:
    case BinaryKind::Minimum: {
      const bool is_max = kind == BinaryKind::Maximum;
      OPENREG_DISPATCH_NATIVE_TYPES(compute, "openreg_maximum", [&] {
        // NaN wins, as in torch.maximum / torch.minimum.
        launch_binary_functor<scalar_t>(iter, a, b, [is_max](scalar_t x, scalar_t y) {
          if constexpr (std::is_floating_point_v<scalar_t>) {
            if (x != x) return x;
            if (y != y) return y;
          }
          return (is_max ? x > y : x < y) ? x : y;
        });
      });
      break;
    }
    default:
      TORCH_INTERNAL_ASSERT(false, "not an arithmetic op");
  }
}

} // namespace openreg::native
// [/native-kernel]
