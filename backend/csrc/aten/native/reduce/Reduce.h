#pragma once

// Reductions (sum, mean, amax/max, max.dim) as native kernels. The host
// computes which dims are kept and reduced; the kernel walks the input with
// plain strides.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/OptionalArrayRef.h>

#include <optional>
#include <tuple>

namespace openreg::native {

enum class ReduceKind { Sum, Mean, Max };

// kind over `dims` (empty = all). dtype: the result dtype of sum/mean.
// nullopt = the caller uses the CPU fallback.
std::optional<at::Tensor> run_reduce(ReduceKind kind, const at::Tensor& self,
                                     at::OptionalIntArrayRef dims, bool keepdim,
                                     std::optional<c10::ScalarType> dtype);

// max.dim: values and the index of the first maximum along `dim`.
std::optional<std::tuple<at::Tensor, at::Tensor>> run_max_dim(const at::Tensor& self, int64_t dim,
                                                               bool keepdim);

} // namespace openreg::native
