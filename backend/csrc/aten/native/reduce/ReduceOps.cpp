// Dispatcher registrations of the reduction kernels.

#include "aten/native/OpSupport.h"
#include "aten/native/reduce/Reduce.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/sum_ops.h>
#include <torch/library.h>

namespace openreg::native {
namespace {

using at::Tensor;
using DtypeArg = std::optional<c10::ScalarType>;

// out= forms compute into a fresh tensor and copy: reductions are rarely
// called with out= and this keeps one code path.
Tensor& assign_out(Tensor& out, const Tensor& result) {
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

Tensor sum(const Tensor& self, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Sum, self, std::nullopt, false, dtype)) return *r;
  return cpu_fallback_op<at::_ops::sum>(self, dtype);
}

Tensor sum_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Sum, self, dim, keepdim, dtype)) return *r;
  return cpu_fallback_op<at::_ops::sum_dim_IntList>(self, dim, keepdim, dtype);
}

Tensor& sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype, Tensor& out) {
  if (is_native_tensor(out)) {
    if (auto r = run_reduce(ReduceKind::Sum, self, dim, keepdim, dtype.value_or(out.scalar_type()))) {
      return assign_out(out, *r);
    }
  }
  return cpu_fallback_op<at::_ops::sum_IntList_out>(self, dim, keepdim, dtype, out);
}

Tensor mean(const Tensor& self, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Mean, self, std::nullopt, false, dtype)) return *r;
  return cpu_fallback_op<at::_ops::mean>(self, dtype);
}

Tensor mean_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Mean, self, dim, keepdim, dtype)) return *r;
  return cpu_fallback_op<at::_ops::mean_dim>(self, dim, keepdim, dtype);
}

Tensor& mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype, Tensor& out) {
  if (is_native_tensor(out)) {
    if (auto r = run_reduce(ReduceKind::Mean, self, dim, keepdim, dtype.value_or(out.scalar_type()))) {
      return assign_out(out, *r);
    }
  }
  return cpu_fallback_op<at::_ops::mean_out>(self, dim, keepdim, dtype, out);
}

Tensor amax(const Tensor& self, at::IntArrayRef dim, bool keepdim) {
  if (auto r = run_reduce(ReduceKind::Max, self, dim, keepdim, std::nullopt)) return *r;
  return cpu_fallback_op<at::_ops::amax>(self, dim, keepdim);
}

Tensor& amax_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  if (is_native_tensor(out) && out.scalar_type() == self.scalar_type()) {
    if (auto r = run_reduce(ReduceKind::Max, self, dim, keepdim, std::nullopt)) return assign_out(out, *r);
  }
  return cpu_fallback_op<at::_ops::amax_out>(self, dim, keepdim, out);
}

Tensor max(const Tensor& self) {
  if (auto r = run_reduce(ReduceKind::Max, self, std::nullopt, false, std::nullopt)) return *r;
  return cpu_fallback_op<at::_ops::max>(self);
}

std::tuple<Tensor, Tensor> max_dim(const Tensor& self, int64_t dim, bool keepdim) {
  if (auto r = run_max_dim(self, dim, keepdim)) return *r;
  return cpu_fallback_op<at::_ops::max_dim>(self, dim, keepdim);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum", TORCH_FN(sum));
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean", TORCH_FN(mean));
  m.impl("mean.dim", TORCH_FN(mean_dim));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("amax", TORCH_FN(amax));
  m.impl("amax.out", TORCH_FN(amax_out));
  m.impl("max", TORCH_FN(max));
  m.impl("max.dim", TORCH_FN(max_dim));
}

} // namespace openreg::native
