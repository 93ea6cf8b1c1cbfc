#pragma once

// Binary elementwise ops (arithmetic and comparisons) with PyTorch's type
// promotion, broadcasting and 0-dim CPU scalar operands.

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <optional>

namespace openreg::native {

enum class BinaryKind { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };

inline bool is_comparison(BinaryKind kind) {
  return kind >= BinaryKind::Eq;
}

// One input as the kernel sees it: a device tensor in the compute dtype, or a
// host constant folded into the kernel's closure.
struct BinaryOperand {
  at::Tensor tensor;
  c10::Scalar scalar;
  bool is_scalar = false;
};

// Runs self <kind> other (add/sub: self + alpha * other) natively into `out`
// (undefined: allocate; otherwise an out= or in-place destination). Returns
// nullopt when the native kernels do not take this call, so the caller routes
// it to the CPU fallback, which also owns PyTorch's error messages for
// unsupported combinations.
std::optional<at::Tensor> run_binary(BinaryKind kind, const at::Tensor& self,
                                     const at::Tensor& other, const c10::Scalar& alpha,
                                     const at::Tensor& out);

// Same with a Scalar right-hand side (eq.Scalar, pow.Tensor_Scalar, ...).
std::optional<at::Tensor> run_binary(BinaryKind kind, const at::Tensor& self,
                                     const c10::Scalar& other, const at::Tensor& out);

// Kernel launchers; iter holds the output and the non-scalar operands.
void launch_arith_kernel(BinaryKind kind, c10::ScalarType compute, const at::TensorIteratorBase& iter,
                         const BinaryOperand& a, const BinaryOperand& b, const c10::Scalar& alpha);
void launch_compare_kernel(BinaryKind kind, c10::ScalarType compute, const at::TensorIteratorBase& iter,
                           const BinaryOperand& a, const BinaryOperand& b);

// Builds iter for out = f(a, b) where a scalar operand is left out of iter.
at::TensorIterator make_binary_iter(const at::Tensor& out, const BinaryOperand& a,
                                    const BinaryOperand& b);

} // namespace openreg::native
