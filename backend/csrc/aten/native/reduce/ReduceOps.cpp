// Dispatcher registrations of the reduction kernels.

#include "aten/native/OpSupport.h"
#include "aten/native/reduce/Reduce.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/sum_ops.h>

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

} // namespace

Tensor OpenRegNativeFunctions::sum(const Tensor& self, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Sum, self, std::nullopt, false, dtype)) return *r;
  return cpu_fallback_op<at::_ops::sum>(self, dtype);
}

Tensor OpenRegNativeFunctions::sum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Sum, self, dim, keepdim, dtype)) return *r;
  return cpu_fallback_op<at::_ops::sum_dim_IntList>(self, dim, keepdim, dtype);
}

Tensor& OpenRegNativeFunctions::sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype, Tensor& out) {
  if (is_native_tensor(out)) {
    if (auto r = run_reduce(ReduceKind::Sum, self, dim, keepdim, dtype.value_or(out.scalar_type()))) {
      return assign_out(out, *r);
    }
  }
  return cpu_fallback_op<at::_ops::sum_IntList_out>(self, dim, keepdim, dtype, out);
}

Tensor OpenRegNativeFunctions::mean(const Tensor& self, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Mean, self, std::nullopt, false, dtype)) return *r;
  return cpu_fallback_op<at::_ops::mean>(self, dtype);
}

Tensor OpenRegNativeFunctions::mean(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype) {
  if (auto r = run_reduce(ReduceKind::Mean, self, dim, keepdim, dtype)) return *r;
  return cpu_fallback_op<at::_ops::mean_dim>(self, dim, keepdim, dtype);
}

Tensor& OpenRegNativeFunctions::mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, DtypeArg dtype, Tensor& out) {
  if (is_native_tensor(out)) {
    if (auto r = run_reduce(ReduceKind::Mean, self, dim, keepdim, dtype.value_or(out.scalar_type()))) {
      return assign_out(out, *r);
    }
  }
  return cpu_fallback_op<at::_ops::mean_out>(self, dim, keepdim, dtype, out);
}

Tensor OpenRegNativeFunctions::amax(const Tensor& self, at::IntArrayRef dim, bool keepdim) {
  if (auto r = run_reduce(ReduceKind::Max, self, dim, keepdim, std::nullopt)) return *r;
  return cpu_fallback_op<at::_ops::amax>(self, dim, keepdim);
}

Tensor& OpenRegNativeFunctions::amax_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  if (is_native_tensor(out) && out.scalar_type() == self.scalar_type()) {
    if (auto r = run_reduce(ReduceKind::Max, self, dim, keepdim, std::nullopt)) return assign_out(out, *r);
  }
  return cpu_fallback_op<at::_ops::amax_out>(self, dim, keepdim, out);
}

Tensor OpenRegNativeFunctions::max(const Tensor& self) {
  if (auto r = run_reduce(ReduceKind::Max, self, std::nullopt, false, std::nullopt)) return *r;
  return cpu_fallback_op<at::_ops::max>(self);
}

std::tuple<Tensor, Tensor> OpenRegNativeFunctions::max(const Tensor& self, int64_t dim, bool keepdim) {
  if (auto r = run_max_dim(self, dim, keepdim)) return *r;
  return cpu_fallback_op<at::_ops::max_dim>(self, dim, keepdim);
}

} // namespace openreg::native
