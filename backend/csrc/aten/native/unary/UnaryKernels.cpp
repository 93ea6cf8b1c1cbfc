#include "aten/launch/Elementwise.h"
#include "aten/native/OpSupport.h"
#include "aten/native/unary/Unary.h"

#include <cmath>
#include <type_traits>

namespace openreg::native {
namespace {

template <typename T>
constexpr T kSqrt1_2 = T(0.70710678118654752440);
template <typename T>
constexpr T kBeta = T(0.79788456080286535588);  // sqrt(2 / pi)
template <typename T>
constexpr T kKappa = T(0.044715);

template <typename T>
void launch_float_unary(UnaryKind kind, const at::TensorIteratorBase& iter) {
  switch (kind) {
    case UnaryKind::Exp: launch_elementwise<T, T>(iter, [](T x) { return std::exp(x); }); break;
    case UnaryKind::Log: launch_elementwise<T, T>(iter, [](T x) { return std::log(x); }); break;
    case UnaryKind::Sqrt: launch_elementwise<T, T>(iter, [](T x) { return std::sqrt(x); }); break;
    case UnaryKind::Tanh: launch_elementwise<T, T>(iter, [](T x) { return std::tanh(x); }); break;
    case UnaryKind::Sigmoid:
      launch_elementwise<T, T>(iter, [](T x) { return T(1) / (T(1) + std::exp(-x)); });
      break;
    case UnaryKind::GeluErf:
      launch_elementwise<T, T>(iter, [](T x) { return T(0.5) * x * (T(1) + std::erf(x * kSqrt1_2<T>)); });
      break;
    case UnaryKind::GeluTanh:
      launch_elementwise<T, T>(iter, [](T x) {
        return T(0.5) * x * (T(1) + std::tanh(kBeta<T> * (x + kKappa<T> * x * x * x)));
      });
      break;
    default:
      TORCH_INTERNAL_ASSERT(false, "not a floating-point unary op");
  }
}

} // namespace

// [native-kernel-unary]
void launch_unary_kernel(UnaryKind kind, c10::ScalarType dtype, const at::TensorIteratorBase& iter) {
  if (kind == UnaryKind::Neg || kind == UnaryKind::Relu) {
    OPENREG_DISPATCH_NATIVE_NUMBERS(dtype, "openreg_neg_relu", [&] {
      if (kind == UnaryKind::Neg) {
        launch_elementwise<scalar_t, scalar_t>(iter, [](scalar_t x) { return scalar_t(-x); });
      } else {
        // NaN stays NaN (x > 0 is false for NaN but x != x catches it), as in torch.relu.
        launch_elementwise<scalar_t, scalar_t>(iter, [](scalar_t x) {
          return (x > scalar_t(0) || x != x) ? x : scalar_t(0);
        });
      }
    });
    return;
  }
  OPENREG_DISPATCH_NATIVE_FLOATS(dtype, "openreg_unary", [&] { launch_float_unary<scalar_t>(kind, iter); });
}
// [/native-kernel-unary]

void launch_grad_kernel(GradKind kind, c10::ScalarType dtype, const at::TensorIteratorBase& iter,
                        double threshold) {
  if (kind == GradKind::Threshold) {
    OPENREG_DISPATCH_NATIVE_NUMBERS(dtype, "openreg_threshold_backward", [&] {
      const scalar_t limit = static_cast<scalar_t>(threshold);
      launch_elementwise<scalar_t, scalar_t, scalar_t>(iter, [limit](scalar_t grad, scalar_t x) {
        return x <= limit ? scalar_t(0) : grad;
      });
    });
    return;
  }
  OPENREG_DISPATCH_NATIVE_FLOATS(dtype, "openreg_gelu_backward", [&] {
    using T = scalar_t;
    if (kind == GradKind::GeluErf) {
      launch_elementwise<T, T, T>(iter, [](T grad, T x) {
        const T cdf = T(0.5) * (T(1) + std::erf(x * kSqrt1_2<T>));
        const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1/sqrt(2 pi)
        return grad * (cdf + x * pdf);
      });
    } else {
      launch_elementwise<T, T, T>(iter, [](T grad, T x) {
        const T inner = kBeta<T> * (x + kKappa<T> * x * x * x);
        const T t = std::tanh(inner);
        const T left_derivative = T(0.5) * (T(1) + t);
        const T right_derivative =
            T(0.5) * x * (T(1) - t * t) * kBeta<T> * (T(1) + T(3) * kKappa<T> * x * x);
        return grad * (left_derivative + right_derivative);
      });
    }
  });
}

} // namespace openreg::native
