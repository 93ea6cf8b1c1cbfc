// Dispatcher registrations of the unary kernels and their backward kernels.

#include "aten/native/OpSupport.h"
#include "aten/native/unary/Unary.h"

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
#include <torch/library.h>

#include <string_view>

namespace openreg::native {
namespace {

using at::Tensor;

#define OPENREG_UNARY(op, KIND)                                      \
  Tensor op(const Tensor& self) {                                    \
    if (auto r = run_unary(KIND, self, Tensor())) return *r;         \
    return cpu_fallback_op<at::_ops::op>(self);                      \
  }                                                                  \
  Tensor& op##_inplace(Tensor& self) {                               \
    if (run_unary(KIND, self, self)) return self;                    \
    return cpu_fallback_op<at::_ops::op##_>(self);                   \
  }                                                                  \
  Tensor& op##_out(const Tensor& self, Tensor& out) {                \
    if (run_unary(KIND, self, out)) return out;                      \
    return cpu_fallback_op<at::_ops::op##_out>(self, out);           \
  }

OPENREG_UNARY(neg, UnaryKind::Neg)
OPENREG_UNARY(exp, UnaryKind::Exp)
OPENREG_UNARY(log, UnaryKind::Log)
OPENREG_UNARY(sqrt, UnaryKind::Sqrt)
OPENREG_UNARY(tanh, UnaryKind::Tanh)
OPENREG_UNARY(sigmoid, UnaryKind::Sigmoid)

Tensor relu(const Tensor& self) {
  if (auto r = run_unary(UnaryKind::Relu, self, Tensor())) return *r;
  return cpu_fallback_op<at::_ops::relu>(self);
}

Tensor& relu_inplace(Tensor& self) {
  if (run_unary(UnaryKind::Relu, self, self)) return self;
  return cpu_fallback_op<at::_ops::relu_>(self);
}

// Unknown approximation names go to the fallback, which raises PyTorch's error.
std::optional<UnaryKind> gelu_kind(std::string_view approximate) {
  if (approximate == "none") return UnaryKind::GeluErf;
  if (approximate == "tanh") return UnaryKind::GeluTanh;
  return std::nullopt;
}

Tensor gelu(const Tensor& self, c10::string_view approximate) {
  if (auto kind = gelu_kind(approximate)) {
    if (auto r = run_unary(*kind, self, Tensor())) return *r;
  }
  return cpu_fallback_op<at::_ops::gelu>(self, approximate);
}

Tensor& gelu_inplace(Tensor& self, c10::string_view approximate) {
  if (auto kind = gelu_kind(approximate)) {
    if (run_unary(*kind, self, self)) return self;
  }
  return cpu_fallback_op<at::_ops::gelu_>(self, approximate);
}

Tensor& gelu_out(const Tensor& self, c10::string_view approximate, Tensor& out) {
  if (auto kind = gelu_kind(approximate)) {
    if (run_unary(*kind, self, out)) return out;
  }
  return cpu_fallback_op<at::_ops::gelu_out>(self, approximate, out);
}

Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, c10::string_view approximate) {
  if (auto kind = gelu_kind(approximate)) {
    const GradKind grad_kind = *kind == UnaryKind::GeluErf ? GradKind::GeluErf : GradKind::GeluTanh;
    if (auto r = run_grad(grad_kind, grad_output, self, 0.0)) return *r;
  }
  return cpu_fallback_op<at::_ops::gelu_backward>(grad_output, self, approximate);
}

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const c10::Scalar& threshold) {
  if (!threshold.isComplex()) {
    if (auto r = run_grad(GradKind::Threshold, grad_output, self, threshold.toDouble())) return *r;
  }
  return cpu_fallback_op<at::_ops::threshold_backward>(grad_output, self, threshold);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define OPENREG_REGISTER_UNARY(op)                 \
  m.impl(#op, TORCH_FN(op));                       \
  m.impl(#op "_", TORCH_FN(op##_inplace));         \
  m.impl(#op ".out", TORCH_FN(op##_out));
  OPENREG_REGISTER_UNARY(neg)
  OPENREG_REGISTER_UNARY(exp)
  OPENREG_REGISTER_UNARY(log)
  OPENREG_REGISTER_UNARY(sqrt)
  OPENREG_REGISTER_UNARY(tanh)
  OPENREG_REGISTER_UNARY(sigmoid)
#undef OPENREG_REGISTER_UNARY
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_inplace));
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(gelu_inplace));
  m.impl("gelu.out", TORCH_FN(gelu_out));
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));
}

} // namespace openreg::native
