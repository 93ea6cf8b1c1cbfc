#include "aten/native/binary/Binary.h"

#include "aten/native/OpSupport.h"

#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/DefaultDtype.h>

namespace openreg::native {
namespace {

at::Tensor wrapped_scalar(const c10::Scalar& s) {
  at::Tensor t = c10::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

bool takes_operand(const at::Tensor& t) {
  return is_native_tensor(t) || (is_host_scalar(t) && is_native_dtype(t.scalar_type()));
}

// The dtype the kernel computes in, or nullopt when the call belongs to the
// fallback (unsupported dtypes, and the cases where PyTorch raises: bool
// subtraction, float alpha with integer tensors, ...).
std::optional<c10::ScalarType> compute_dtype(BinaryKind kind, const at::Tensor& self,
                                             const at::Tensor& other, const c10::Scalar& alpha) {
  if (!native_kernels_enabled() || !takes_operand(self) || !takes_operand(other) ||
      (is_host_scalar(self) && is_host_scalar(other))) {
    return std::nullopt;
  }
  c10::ScalarType compute = at::result_type(self, other);
  if (kind == BinaryKind::Div && c10::isIntegralType(compute, /*includeBool=*/true)) {
    compute = c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  if (!is_native_dtype(compute)) {
    return std::nullopt;
  }
  switch (kind) {
    case BinaryKind::Add:
    case BinaryKind::Sub:
      if (compute == c10::kBool || alpha.isComplex() ||
          (c10::isIntegralType(compute, false) && alpha.isFloatingPoint())) {
        return std::nullopt;
      }
      break;
    case BinaryKind::Div:
    case BinaryKind::Pow:
      if (!is_native_float(compute)) {
        return std::nullopt;
      }
      break;
    default:
      break;
  }
  return compute;
}

BinaryOperand prepare(const at::Tensor& t, c10::ScalarType compute) {
  if (is_host_scalar(t)) {
    return {at::Tensor(), t.item(), true};
  }
  return {t.scalar_type() == compute ? t : t.to(compute), c10::Scalar(), false};
}

} // namespace

at::TensorIterator make_binary_iter(const at::Tensor& out, const BinaryOperand& a,
                                    const BinaryOperand& b) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true).check_all_same_dtype(false).resize_outputs(false);
  config.add_output(out);
  if (!a.is_scalar) {
    config.add_const_input(a.tensor);
  }
  if (!b.is_scalar) {
    config.add_const_input(b.tensor);
  }
  return config.build();
}

std::optional<at::Tensor> run_binary(BinaryKind kind, const at::Tensor& self,
                                     const at::Tensor& other, const c10::Scalar& alpha,
                                     const at::Tensor& out) {
  check_same_device(self, other);
  if (out.defined()) {
    check_same_device(self, out);
    if (!is_native_tensor(out)) {
      return std::nullopt;
    }
  }
  const auto compute = compute_dtype(kind, self, other, alpha);
  if (!compute) {
    return std::nullopt;
  }
  const c10::ScalarType result = is_comparison(kind) ? c10::kBool : *compute;
  if (out.defined() && !c10::canCast(result, out.scalar_type())) {
    return std::nullopt;
  }
  BinaryOperand a = prepare(self, *compute);
  BinaryOperand b = prepare(other, *compute);
  // A scalar on the left is rare (torch.sub(cpu_scalar, t)): materialise it on
  // the device so the kernels only need the tensor-scalar form.
  if (a.is_scalar) {
    a = {at::scalar_tensor(a.scalar, b.tensor.options()), c10::Scalar(), false};
  }
  const at::Tensor& like = a.tensor;
  const at::DimVector shape = b.is_scalar
      ? at::DimVector(like.sizes())
      : at::infer_size_dimvector(a.tensor.sizes(), b.tensor.sizes());

  const bool in_place = out.defined() && out.is_same(self);
  at::Tensor dest = out;
  if (!dest.defined()) {
    dest = at::empty(shape, like.options().dtype(result));
  } else if (in_place) {
    TORCH_CHECK(dest.sizes().equals(shape), "output with shape ", dest.sizes(),
                " doesn't match the broadcast shape ", shape);
  } else {
    at::native::resize_output(dest, shape);
  }
  at::Tensor target =
      dest.scalar_type() == result ? dest : at::empty(shape, like.options().dtype(result));
  auto iter = make_binary_iter(target, a, b);
  if (is_comparison(kind)) {
    launch_compare_kernel(kind, *compute, iter, a, b);
  } else {
    launch_arith_kernel(kind, *compute, iter, a, b, alpha);
  }
  if (!target.is_same(dest)) {
    dest.copy_(target);
  }
  return dest;
}

std::optional<at::Tensor> run_binary(BinaryKind kind, const at::Tensor& self,
                                     const c10::Scalar& other, const at::Tensor& out) {
  return run_binary(kind, self, wrapped_scalar(other), c10::Scalar(1), out);
}

} // namespace openreg::native
