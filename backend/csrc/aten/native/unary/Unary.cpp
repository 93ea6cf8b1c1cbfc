#include "aten/native/unary/Unary.h"

#include "aten/native/OpSupport.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/DefaultDtype.h>

namespace openreg::native {
namespace {

bool is_floating_kind(UnaryKind kind) {
  return kind != UnaryKind::Neg && kind != UnaryKind::Relu;
}

at::TensorIterator make_unary_iter(const at::Tensor& out, const at::Tensor& in) {
  return at::TensorIteratorConfig()
      .check_all_same_dtype(false)
      .resize_outputs(false)
      .add_output(out)
      .add_const_input(in)
      .build();
}

} // namespace

std::optional<at::Tensor> run_unary(UnaryKind kind, const at::Tensor& self, const at::Tensor& out) {
  if (out.defined()) {
    check_same_device(self, out);
  }
  if (!native_kernels_enabled() || !is_native_tensor(self) || (out.defined() && !is_native_tensor(out))) {
    return std::nullopt;
  }
  c10::ScalarType compute = self.scalar_type();
  if (is_floating_kind(kind) && c10::isIntegralType(compute, /*includeBool=*/true)) {
    compute = c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  // neg/relu of bool raise in PyTorch; the fallback says so.
  if (compute == c10::kBool || (out.defined() && !c10::canCast(compute, out.scalar_type()))) {
    return std::nullopt;
  }
  const at::Tensor input = self.scalar_type() == compute ? self : self.to(compute);
  at::Tensor dest = out;
  if (!dest.defined()) {
    dest = at::empty(self.sizes(), self.options().dtype(compute));
  } else if (!dest.is_same(self)) {
    at::native::resize_output(dest, self.sizes());
  }
  at::Tensor target = dest.scalar_type() == compute ? dest : at::empty(self.sizes(), self.options().dtype(compute));
  launch_unary_kernel(kind, compute, make_unary_iter(target, input));
  if (!target.is_same(dest)) {
    dest.copy_(target);
  }
  return dest;
}

std::optional<at::Tensor> run_grad(GradKind kind, const at::Tensor& grad_output,
                                   const at::Tensor& self, double threshold) {
  check_same_device(grad_output, self);
  if (!native_kernels_enabled() || !is_native_tensor(grad_output) || !is_native_tensor(self) ||
      grad_output.scalar_type() != self.scalar_type() || self.scalar_type() == c10::kBool ||
      (kind != GradKind::Threshold && !is_native_float(self.scalar_type()))) {
    return std::nullopt;
  }
  at::Tensor grad_input = at::empty(
      at::infer_size_dimvector(grad_output.sizes(), self.sizes()), self.options());
  auto iter = at::TensorIteratorConfig()
                  .resize_outputs(false)
                  .add_output(grad_input)
                  .add_const_input(grad_output)
                  .add_const_input(self)
                  .build();
  launch_grad_kernel(kind, self.scalar_type(), iter, threshold);
  return grad_input;
}

} // namespace openreg::native
