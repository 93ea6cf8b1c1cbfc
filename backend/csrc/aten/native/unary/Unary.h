#pragma once

// Unary elementwise ops and the two-input gradient kernels autograd uses for
// them (relu -> threshold_backward, gelu -> gelu_backward).

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>

#include <optional>

namespace openreg::native {

enum class UnaryKind { Neg, Exp, Log, Sqrt, Relu, Sigmoid, Tanh, GeluErf, GeluTanh };

// Runs kind(self) natively into out (undefined: allocate; may be self for the
// in-place form); nullopt = the caller uses the CPU fallback.
std::optional<at::Tensor> run_unary(UnaryKind kind, const at::Tensor& self, const at::Tensor& out);

void launch_unary_kernel(UnaryKind kind, c10::ScalarType dtype, const at::TensorIteratorBase& iter);

enum class GradKind { Threshold, GeluErf, GeluTanh };

// grad_input = d kind(self) * grad_output; `threshold` only for Threshold.
std::optional<at::Tensor> run_grad(GradKind kind, const at::Tensor& grad_output,
                                   const at::Tensor& self, double threshold);

// iter: grad_input, grad_output, self (all `dtype`).
void launch_grad_kernel(GradKind kind, c10::ScalarType dtype, const at::TensorIteratorBase& iter,
                        double threshold);

} // namespace openreg::native
