// Dispatcher registrations of the binary elementwise kernels. Each wrapper
// tries the native kernel and otherwise hands the very same call to the CPU
// fallback, so unsupported dtypes and PyTorch's error cases behave as on CPU.

#include "aten/native/binary/Binary.h"
#include "aten/native/OpSupport.h"

#include <ATen/ops/add_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/sub_ops.h>
#include <torch/library.h>

namespace openreg::native {
namespace {

using at::Tensor;
using c10::Scalar;

// self (op) other with alpha: functional, in-place and out= forms.
#define OPENREG_ALPHA_BINARY(name, KIND, OUT_OP, INPLACE_OP)                                 \
  Tensor& name##_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) { \
    if (run_binary(KIND, self, other, alpha, out)) return out;                               \
    return cpu_fallback_op<at::_ops::OUT_OP>(self, other, alpha, out);                      \
  }                                                                                          \
  Tensor& name##_inplace(Tensor& self, const Tensor& other, const Scalar& alpha) {          \
    if (run_binary(KIND, self, other, alpha, self)) return self;                             \
    return cpu_fallback_op<at::_ops::INPLACE_OP>(self, other, alpha);                       \
  }

// self (op) other: functional, in-place and out= forms.
#define OPENREG_PLAIN_BINARY(name, KIND, FUNC_OP, OUT_OP)                                    \
  Tensor name(const Tensor& self, const Tensor& other) {                                     \
    if (auto r = run_binary(KIND, self, other, Scalar(1), Tensor())) return *r;              \
    return cpu_fallback_op<at::_ops::FUNC_OP>(self, other);                                 \
  }                                                                                          \
  Tensor& name##_out(const Tensor& self, const Tensor& other, Tensor& out) {                 \
    if (run_binary(KIND, self, other, Scalar(1), out)) return out;                           \
    return cpu_fallback_op<at::_ops::OUT_OP>(self, other, out);                             \
  }

#define OPENREG_SCALAR_BINARY(name, KIND, FUNC_OP, OUT_OP)                                   \
  Tensor name(const Tensor& self, const Scalar& other) {                                     \
    if (auto r = run_binary(KIND, self, other, Tensor())) return *r;                         \
    return cpu_fallback_op<at::_ops::FUNC_OP>(self, other);                                 \
  }                                                                                          \
  Tensor& name##_out(const Tensor& self, const Scalar& other, Tensor& out) {                 \
    if (run_binary(KIND, self, other, out)) return out;                                      \
    return cpu_fallback_op<at::_ops::OUT_OP>(self, other, out);                             \
  }

#define OPENREG_INPLACE_BINARY(name, KIND, INPLACE_OP)                                       \
  Tensor& name(Tensor& self, const Tensor& other) {                                          \
    if (run_binary(KIND, self, other, Scalar(1), self)) return self;                         \
    return cpu_fallback_op<at::_ops::INPLACE_OP>(self, other);                              \
  }

Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (auto r = run_binary(BinaryKind::Add, self, other, alpha, Tensor())) return *r;
  return cpu_fallback_op<at::_ops::add_Tensor>(self, other, alpha);
}
OPENREG_ALPHA_BINARY(add, BinaryKind::Add, add_out, add__Tensor)
// sub.Tensor itself is the per-op fallback example (PerOpFallback.cpp).
OPENREG_ALPHA_BINARY(sub, BinaryKind::Sub, sub_out, sub__Tensor)

OPENREG_PLAIN_BINARY(mul, BinaryKind::Mul, mul_Tensor, mul_out)
OPENREG_INPLACE_BINARY(mul_inplace, BinaryKind::Mul, mul__Tensor)
OPENREG_PLAIN_BINARY(div, BinaryKind::Div, div_Tensor, div_out)
OPENREG_INPLACE_BINARY(div_inplace, BinaryKind::Div, div__Tensor)
OPENREG_PLAIN_BINARY(pow, BinaryKind::Pow, pow_Tensor_Tensor, pow_Tensor_Tensor_out)
OPENREG_INPLACE_BINARY(pow_inplace, BinaryKind::Pow, pow__Tensor)
OPENREG_SCALAR_BINARY(pow_scalar, BinaryKind::Pow, pow_Tensor_Scalar, pow_Tensor_Scalar_out)
OPENREG_PLAIN_BINARY(maximum, BinaryKind::Maximum, maximum, maximum_out)
OPENREG_PLAIN_BINARY(minimum, BinaryKind::Minimum, minimum, minimum_out)

Tensor& pow_scalar_inplace(Tensor& self, const Scalar& exponent) {
  if (run_binary(BinaryKind::Pow, self, exponent, self)) return self;
  return cpu_fallback_op<at::_ops::pow__Scalar>(self, exponent);
}

#define OPENREG_COMPARISON(op, KIND)                                      \
  OPENREG_PLAIN_BINARY(op##_tensor, KIND, op##_Tensor, op##_Tensor_out)   \
  OPENREG_SCALAR_BINARY(op##_scalar, KIND, op##_Scalar, op##_Scalar_out)

OPENREG_COMPARISON(eq, BinaryKind::Eq)
OPENREG_COMPARISON(ne, BinaryKind::Ne)
OPENREG_COMPARISON(lt, BinaryKind::Lt)
OPENREG_COMPARISON(le, BinaryKind::Le)
OPENREG_COMPARISON(gt, BinaryKind::Gt)
OPENREG_COMPARISON(ge, BinaryKind::Ge)

} // namespace

// [native-registration]
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add_.Tensor", TORCH_FN(add_inplace));
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub_.Tensor", TORCH_FN(sub_inplace));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("mul_.Tensor", TORCH_FN(mul_inplace));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("div_.Tensor", TORCH_FN(div_inplace));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("pow.Tensor_Tensor", TORCH_FN(pow));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(pow_out));
  m.impl("pow_.Tensor", TORCH_FN(pow_inplace));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_scalar));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_scalar_out));
  m.impl("pow_.Scalar", TORCH_FN(pow_scalar_inplace));
  m.impl("maximum", TORCH_FN(maximum));
  m.impl("maximum.out", TORCH_FN(maximum_out));
  m.impl("minimum", TORCH_FN(minimum));
  m.impl("minimum.out", TORCH_FN(minimum_out));
#define OPENREG_REGISTER_COMPARISON(op)                     \
  m.impl(#op ".Tensor", TORCH_FN(op##_tensor));             \
  m.impl(#op ".Tensor_out", TORCH_FN(op##_tensor_out));     \
  m.impl(#op ".Scalar", TORCH_FN(op##_scalar));             \
  m.impl(#op ".Scalar_out", TORCH_FN(op##_scalar_out));
  OPENREG_REGISTER_COMPARISON(eq)
  OPENREG_REGISTER_COMPARISON(ne)
  OPENREG_REGISTER_COMPARISON(lt)
  OPENREG_REGISTER_COMPARISON(le)
  OPENREG_REGISTER_COMPARISON(gt)
  OPENREG_REGISTER_COMPARISON(ge)
#undef OPENREG_REGISTER_COMPARISON
}
// [/native-registration]

} // namespace openreg::native
