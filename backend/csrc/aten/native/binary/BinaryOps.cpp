// The binary elementwise kernels of OpenRegNativeFunctions (registered by the
// generated RegisterPrivateUse1.cpp, see csrc/aten/native_functions.yaml). Each
// tries the native kernel and otherwise hands the very same call to the CPU
// fallback, so unsupported dtypes and PyTorch's error cases behave as on CPU.

#include "aten/native/binary/Binary.h"
#include "aten/native/OpSupport.h"
#include "PrivateUse1NativeFunctions.h"

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

namespace openreg::native {
namespace {

using at::Tensor;
using c10::Scalar;

} // namespace

// The members are named as the dispatcher names the op: add_.Tensor -> add_,
// add.out -> add_out; overloads (pow.Tensor_Tensor, pow.Tensor_Scalar) are C++
// overloads.
// [native-kernels]
// self (op) other with alpha: in-place and out= forms.
#define OPENREG_ALPHA_BINARY(name, KIND, OUT_OP, INPLACE_OP)                                   \
  Tensor& OpenRegNativeFunctions::name##_out(const Tensor& self, const Tensor& other,          \
                                             const Scalar& alpha, Tensor& out) {               \
    if (run_binary(KIND, self, other, alpha, out)) return out;                                 \
    return cpu_fallback_op<at::_ops::OUT_OP>(self, other, alpha, out);                        \
  }                                                                                            \
  Tensor& OpenRegNativeFunctions::name##_(Tensor& self, const Tensor& other, const Scalar& alpha) { \
    if (run_binary(KIND, self, other, alpha, self)) return self;                               \
    return cpu_fallback_op<at::_ops::INPLACE_OP>(self, other, alpha);                         \
  }

// [/native-kernels]

// self (op) other: functional, in-place and out= forms.
#define OPENREG_PLAIN_BINARY(name, KIND, FUNC_OP, OUT_OP)                                      \
  Tensor OpenRegNativeFunctions::name(const Tensor& self, const Tensor& other) {               \
    if (auto r = run_binary(KIND, self, other, Scalar(1), Tensor())) return *r;                \
    return cpu_fallback_op<at::_ops::FUNC_OP>(self, other);                                   \
  }                                                                                            \
  Tensor& OpenRegNativeFunctions::name##_out(const Tensor& self, const Tensor& other, Tensor& out) { \
    if (run_binary(KIND, self, other, Scalar(1), out)) return out;                             \
    return cpu_fallback_op<at::_ops::OUT_OP>(self, other, out);                               \
  }

#define OPENREG_INPLACE_BINARY(name, KIND, INPLACE_OP)                                         \
  Tensor& OpenRegNativeFunctions::name##_(Tensor& self, const Tensor& other) {                 \
    if (run_binary(KIND, self, other, Scalar(1), self)) return self;                           \
    return cpu_fallback_op<at::_ops::INPLACE_OP>(self, other);                                \
  }

#define OPENREG_SCALAR_BINARY(name, KIND, FUNC_OP, OUT_OP)                                     \
  Tensor OpenRegNativeFunctions::name(const Tensor& self, const Scalar& other) {               \
    if (auto r = run_binary(KIND, self, other, Tensor())) return *r;                           \
    return cpu_fallback_op<at::_ops::FUNC_OP>(self, other);                                   \
  }                                                                                            \
  Tensor& OpenRegNativeFunctions::name##_out(const Tensor& self, const Scalar& other, Tensor& out) { \
    if (run_binary(KIND, self, other, out)) return out;                                        \
    return cpu_fallback_op<at::_ops::OUT_OP>(self, other, out);                               \
  }

Tensor OpenRegNativeFunctions::add(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (auto r = run_binary(BinaryKind::Add, self, other, alpha, Tensor())) return *r;
  return cpu_fallback_op<at::_ops::add_Tensor>(self, other, alpha);
}
OPENREG_ALPHA_BINARY(add, BinaryKind::Add, add_out, add__Tensor)
// sub.Tensor itself is the per-op fallback example (PerOpFallback.cpp).
OPENREG_ALPHA_BINARY(sub, BinaryKind::Sub, sub_out, sub__Tensor)

OPENREG_PLAIN_BINARY(mul, BinaryKind::Mul, mul_Tensor, mul_out)
OPENREG_INPLACE_BINARY(mul, BinaryKind::Mul, mul__Tensor)
OPENREG_PLAIN_BINARY(div, BinaryKind::Div, div_Tensor, div_out)
OPENREG_INPLACE_BINARY(div, BinaryKind::Div, div__Tensor)
OPENREG_PLAIN_BINARY(pow, BinaryKind::Pow, pow_Tensor_Tensor, pow_Tensor_Tensor_out)
OPENREG_INPLACE_BINARY(pow, BinaryKind::Pow, pow__Tensor)
OPENREG_SCALAR_BINARY(pow, BinaryKind::Pow, pow_Tensor_Scalar, pow_Tensor_Scalar_out)
OPENREG_PLAIN_BINARY(maximum, BinaryKind::Maximum, maximum, maximum_out)
OPENREG_PLAIN_BINARY(minimum, BinaryKind::Minimum, minimum, minimum_out)

Tensor& OpenRegNativeFunctions::pow_(Tensor& self, const Scalar& exponent) {
  if (run_binary(BinaryKind::Pow, self, exponent, self)) return self;
  return cpu_fallback_op<at::_ops::pow__Scalar>(self, exponent);
}

#define OPENREG_COMPARISON(op, KIND)                                         \
  OPENREG_PLAIN_BINARY(op, KIND, op##_Tensor, op##_Tensor_out)  \
  OPENREG_SCALAR_BINARY(op, KIND, op##_Scalar, op##_Scalar_out)

OPENREG_COMPARISON(eq, BinaryKind::Eq)
OPENREG_COMPARISON(ne, BinaryKind::Ne)
OPENREG_COMPARISON(lt, BinaryKind::Lt)
OPENREG_COMPARISON(le, BinaryKind::Le)
OPENREG_COMPARISON(gt, BinaryKind::Gt)
OPENREG_COMPARISON(ge, BinaryKind::Ge)

} // namespace openreg::native
