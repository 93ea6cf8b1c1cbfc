// Custom operators in the `openreg` namespace: schemas and their backend
// kernels (PrivateUse1, CPU for reference, Meta for shape inference).
// Autograd for them lives in CustomAutograd.cpp.

#include "aten/native/OpSupport.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/relu.h>
#include <torch/library.h>

namespace openreg::native {
namespace {

using at::Tensor;

// [custom-op-schema]
TORCH_LIBRARY_FRAGMENT(openreg, m) {
  m.def("custom_abs(Tensor input) -> Tensor");
  m.def("linear_relu(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
}
// [/custom-op-schema]

// [custom-op-kernels]
// On openreg this is the native abs (DispatchStub path); on CPU the CPU one.
Tensor custom_abs(const Tensor& input) {
  return at::abs(input);
}

// Shape and dtype only: lets torch.compile / FakeTensor trace the op.
Tensor custom_abs_meta(const Tensor& input) {
  return at::empty_like(input);
}
// [/custom-op-kernels]

// relu(input @ weight.T + bias) for 2-D input, composed of native ops.
Tensor linear_relu(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  TORCH_CHECK(input.dim() == 2 && weight.dim() == 2,
              "openreg::linear_relu: expected 2-D input and weight, got ", input.sizes(), " and ",
              weight.sizes());
  const Tensor out = (bias.has_value() && bias->defined()) ? at::addmm(*bias, input, weight.t())
                                                           : at::mm(input, weight.t());
  return at::relu(out);
}

// Hand-written: the openreg:: ops are defined here (TORCH_LIBRARY), not in
// ATen's native_functions.yaml that torchgen generates from.
TORCH_LIBRARY_IMPL(openreg, PrivateUse1, m) {
  m.impl("custom_abs", TORCH_FN(custom_abs));
}

TORCH_LIBRARY_IMPL(openreg, CPU, m) {
  m.impl("custom_abs", TORCH_FN(custom_abs));
}

TORCH_LIBRARY_IMPL(openreg, Meta, m) {
  m.impl("custom_abs", TORCH_FN(custom_abs_meta));
}

// One implementation for every backend below autograd (incl. Meta): it only
// composes ATen ops.
TORCH_LIBRARY_IMPL(openreg, CompositeExplicitAutograd, m) {
  m.impl("linear_relu", TORCH_FN(linear_relu));
}

} // namespace
} // namespace openreg::native
