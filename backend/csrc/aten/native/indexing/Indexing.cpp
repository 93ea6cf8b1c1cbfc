// where and index (gather by one integer index tensor) as native kernels.

#include "aten/launch/Elementwise.h"
#include "aten/native/OpSupport.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegStream.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where_ops.h>

#include <atomic>
#include <memory>

namespace openreg::native {
namespace {

using at::Tensor;

// where(condition, self, other); CPU scalars become device 0-dim tensors so
// one three-input kernel covers every form.
std::optional<Tensor> run_where(const Tensor& condition, const Tensor& self, const Tensor& other,
                                const Tensor& out) {
  check_same_device(condition, self);
  check_same_device(condition, other);
  if (!native_kernels_enabled() || !is_native_tensor(condition) || condition.scalar_type() != c10::kBool) {
    return std::nullopt;
  }
  for (const Tensor* t : {&self, &other}) {
    if (!is_native_tensor(*t) && !(is_host_scalar(*t) && is_native_dtype(t->scalar_type()))) {
      return std::nullopt;
    }
  }
  const c10::ScalarType dtype = at::result_type(self, other);
  if (!is_native_dtype(dtype) || (out.defined() && (!is_native_tensor(out) || out.scalar_type() != dtype))) {
    return std::nullopt;
  }
  auto on_device = [&](const Tensor& t) {
    if (is_host_scalar(t)) return at::scalar_tensor(t.item(), condition.options().dtype(dtype));
    return t.scalar_type() == dtype ? t : t.to(dtype);
  };
  const Tensor a = on_device(self);
  const Tensor b = on_device(other);
  const auto shape = at::infer_size_dimvector(at::infer_size_dimvector(condition.sizes(), a.sizes()), b.sizes());
  Tensor dest = out;
  if (!dest.defined()) {
    dest = at::empty(shape, a.options());
  } else {
    at::native::resize_output(dest, shape);
  }
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(dest)
                  .add_const_input(condition)
                  .add_const_input(a)
                  .add_const_input(b)
                  .build();
  OPENREG_DISPATCH_NATIVE_TYPES(dtype, "openreg_where", [&] {
    launch_elementwise<scalar_t, bool, scalar_t, scalar_t>(
        iter, [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
  });
  return dest;
}

// [native-index]
// self[..., index, ...] with exactly one integer index tensor at `dim` (the
// leading entries of `indices` being None, i.e. full slices). The result is
// self.shape[:dim] + index.shape + self.shape[dim+1:].
template <typename T, typename I>
void gather_kernel(const T* src, T* dst, const I* index, int64_t n_index, int64_t index_stride,
                   int64_t outer, int64_t dim_size, int64_t inner, const int64_t* src_strides,
                   std::atomic<int64_t>* bad_index) {
  // src_strides: {outer, dim, inner} strides of self, valid as self is
  // coalesced to 3 dims on the host (contiguous).
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < n_index; ++k) {
      int64_t i = static_cast<int64_t>(index[k * index_stride]);
      if (i < -dim_size || i >= dim_size) {
        bad_index->store(i);
        i = 0;
      }
      if (i < 0) i += dim_size;
      const T* from = src + o * src_strides[0] + i * src_strides[1];
      T* to = dst + (o * n_index + k) * inner;
      for (int64_t j = 0; j < inner; ++j) to[j] = from[j * src_strides[2]];
    }
  }
}
// [/native-index]

std::optional<Tensor> run_index(const Tensor& self, const c10::List<std::optional<Tensor>>& indices) {
  if (!native_kernels_enabled() || !is_native_tensor(self) || indices.size() == 0 ||
      static_cast<int64_t>(indices.size()) > self.dim()) {
    return std::nullopt;
  }
  int64_t dim = -1;
  Tensor index;
  for (size_t d = 0; d < indices.size(); ++d) {
    const std::optional<Tensor> entry = indices.get(d);
    if (!entry.has_value() || !entry->defined()) continue;
    if (dim >= 0) return std::nullopt;  // several index tensors: fallback
    dim = static_cast<int64_t>(d);
    index = *entry;
  }
  if (dim < 0 || !(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt)) {
    return std::nullopt;  // bool masks need a data-dependent size: fallback
  }
  if (index.device().is_cpu()) {
    index = index.to(self.device());
  }
  check_same_device(self, index);
  const Tensor src = self.contiguous();
  const Tensor idx = index.contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.size(d);
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= self.size(d);
  const int64_t dim_size = self.size(dim);
  at::DimVector shape(self.sizes().begin(), self.sizes().begin() + dim);
  shape.append(idx.sizes().begin(), idx.sizes().end());
  shape.append(self.sizes().begin() + dim + 1, self.sizes().end());
  Tensor out = at::empty(shape, self.options());
  if (out.numel() == 0) return out;
  TORCH_CHECK_INDEX(dim_size > 0, "index is out of bounds for dimension ", dim, " with size 0");

  // Out-of-range indices can only be seen inside the kernel; it records one
  // and the host raises after waiting, like a CUDA device-side assert but
  // recoverable.
  auto bad_index = std::make_shared<std::atomic<int64_t>>(INT64_MIN);
  const std::array<int64_t, 3> strides{dim_size * inner, inner, 1};
  const void* src_ptr = src.const_data_ptr();
  const void* idx_ptr = idx.const_data_ptr();
  void* out_ptr = out.mutable_data_ptr();
  const int64_t n_index = idx.numel();
  const c10::ScalarType dtype = self.scalar_type();
  const c10::ScalarType index_dtype = idx.scalar_type();
  launch_kernel(self.device().index(), [=]() {
    OPENREG_DISPATCH_NATIVE_TYPES(dtype, "openreg_index", [&] {
      using T = scalar_t;
      if (index_dtype == c10::kLong) {
        gather_kernel<T, int64_t>(static_cast<const T*>(src_ptr), static_cast<T*>(out_ptr),
                                  static_cast<const int64_t*>(idx_ptr), n_index, 1, outer, dim_size, inner,
                                  strides.data(), bad_index.get());
      } else {
        gather_kernel<T, int32_t>(static_cast<const T*>(src_ptr), static_cast<T*>(out_ptr),
                                  static_cast<const int32_t*>(idx_ptr), n_index, 1, outer, dim_size, inner,
                                  strides.data(), bad_index.get());
      }
    });
  });
  OPENREG_CHECK(rtStreamSynchronize(openreg::getCurrentRawStream(self.device().index())));
  const int64_t bad = bad_index->load();
  TORCH_CHECK_INDEX(bad == INT64_MIN, "index ", bad, " is out of bounds for dimension ", dim, " with size ",
                    dim_size);
  return out;
}

} // namespace

Tensor OpenRegNativeFunctions::where(const Tensor& condition, const Tensor& self, const Tensor& other) {
  if (auto r = run_where(condition, self, other, Tensor())) return *r;
  return cpu_fallback_op<at::_ops::where_self>(condition, self, other);
}

Tensor& OpenRegNativeFunctions::where_out(const Tensor& condition, const Tensor& self, const Tensor& other, Tensor& out) {
  if (run_where(condition, self, other, out)) return out;
  return cpu_fallback_op<at::_ops::where_self_out>(condition, self, other, out);
}

Tensor OpenRegNativeFunctions::index(const Tensor& self, const c10::List<std::optional<Tensor>>& indices) {
  if (auto r = run_index(self, indices)) return *r;
  return cpu_fallback_op<at::_ops::index_Tensor>(self, indices);
}

} // namespace openreg::native
