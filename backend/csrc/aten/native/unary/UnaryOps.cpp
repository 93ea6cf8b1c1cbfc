// The unary kernels and their backward kernels of OpenRegNativeFunctions
// (registered by the generated RegisterPrivateUse1.cpp).

#include "aten/native/OpSupport.h"
#include "aten/native/unary/Unary.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>

#include <string_view>

namespace openreg::native {
namespace {

using at::Tensor;

// Unknown approximation names go to the fallback, which raises PyTorch's error.
std::optional<UnaryKind> gelu_kind(std::string_view approximate) {
  if (approximate == "none") return UnaryKind::GeluErf;
  if (approximate == "tanh") return UnaryKind::GeluTanh;
  return std::nullopt;
}

} // namespace

#define OPENREG_UNARY(op, KIND)                                      \
  Tensor OpenRegNativeFunctions::op(const Tensor& self) {            \
    if (auto r = run_unary(KIND, self, Tensor())) return *r;         \
    return cpu_fallback_op<at::_ops::op>(self);                      \
  }                                                                  \
  Tensor& OpenRegNativeFunctions::op##_(Tensor& self) {             \
    if (run_unary(KIND, self, self)) return self;                    \
    return cpu_fallback_op<at::_ops::op##_>(self);                   \
  }                                                                  \
  Tensor& OpenRegNativeFunctions::op##_out(const Tensor& self, Tensor& out) { \
    if (run_unary(KIND, self, out)) return out;                      \
    return cpu_fallback_op<at::_ops::op##_out>(self, out);           \
  }

OPENREG_UNARY(neg, UnaryKind::Neg)
OPENREG_UNARY(exp, UnaryKind::Exp)
OPENREG_UNARY(log, UnaryKind::Log)
OPENREG_UNARY(sqrt, UnaryKind::Sqrt)
OPENREG_UNARY(tanh, UnaryKind::Tanh)
OPENREG_UNARY(sigmoid, UnaryKind::Sigmoid)

Tensor OpenRegNativeFunctions::relu(const Tensor& self) {
  if (auto r = run_unary(UnaryKind::Relu, self, Tensor())) return *r;
  return cpu_fallback_op<at::_ops::relu>(self);
}

Tensor& OpenRegNativeFunctions::relu_(Tensor& self) {
  if (run_unary(UnaryKind::Relu, self, self)) return self;
  return cpu_fallback_op<at::_ops::relu_>(self);
}

Tensor OpenRegNativeFunctions::gelu(const Tensor& self, c10::string_view approximate) {
  if (auto kind = gelu_kind(approximate)) {
    if (auto r = run_unary(*kind, self, Tensor())) return *r;
  }
  return cpu_fallback_op<at::_ops::gelu>(self, approximate);
}

Tensor& OpenRegNativeFunctions::gelu_(Tensor& self, c10::string_view approximate) {
  if (auto kind = gelu_kind(approximate)) {
    if (run_unary(*kind, self, self)) return self;
  }
  return cpu_fallback_op<at::_ops::gelu_>(self, approximate);
}

Tensor& OpenRegNativeFunctions::gelu_out(const Tensor& self, c10::string_view approximate, Tensor& out) {
  if (auto kind = gelu_kind(approximate)) {
    if (run_unary(*kind, self, out)) return out;
  }
  return cpu_fallback_op<at::_ops::gelu_out>(self, approximate, out);
}

Tensor OpenRegNativeFunctions::gelu_backward(const Tensor& grad_output, const Tensor& self, c10::string_view approximate) {
  if (auto kind = gelu_kind(approximate)) {
    const GradKind grad_kind = *kind == UnaryKind::GeluErf ? GradKind::GeluErf : GradKind::GeluTanh;
    if (auto r = run_grad(grad_kind, grad_output, self, 0.0)) return *r;
  }
  return cpu_fallback_op<at::_ops::gelu_backward>(grad_output, self, approximate);
}

Tensor OpenRegNativeFunctions::threshold_backward(const Tensor& grad_output, const Tensor& self, const c10::Scalar& threshold) {
  if (!threshold.isComplex()) {
    if (auto r = run_grad(GradKind::Threshold, grad_output, self, threshold.toDouble())) return *r;
  }
  return cpu_fallback_op<at::_ops::threshold_backward>(grad_output, self, threshold);
}

} // namespace openreg::native
