#include "aten/native/reduce/Reduce.h"

#include "aten/launch/Launch.h"
#include "aten/native/OpSupport.h"

#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/empty.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

namespace openreg::native {
namespace {

using Dims = c10::SmallVector<int64_t, 6>;

// Input layout split into kept ("outer", in output order) and reduced
// ("inner") dims, sizes and element strides, both outermost first.
struct ReduceGeometry {
  Dims outer_sizes, outer_strides, inner_sizes, inner_strides;
  int64_t n_out = 1;
  int64_t n_in = 1;
  const char* in = nullptr;
  char* out = nullptr;   // contiguous, n_out elements
  char* index = nullptr; // contiguous int64, n_out elements (max.dim only)
};

// Merges dims that are contiguous with each other and drops size-1 dims so
// the common cases become one flat, stride-1 loop.
void coalesce(Dims& sizes, Dims& strides) {
  Dims s, st;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!s.empty() && st.back() == strides[i] * sizes[i]) {
      s.back() *= sizes[i];
      st.back() = strides[i];
    } else {
      s.push_back(sizes[i]);
      st.push_back(strides[i]);
    }
  }
  sizes = std::move(s);
  strides = std::move(st);
}

ReduceGeometry make_geometry(const at::Tensor& in, const std::bitset<64>& reduced, bool merge) {
  ReduceGeometry g;
  for (int64_t d = 0; d < in.dim(); ++d) {
    auto& sizes = reduced[d] ? g.inner_sizes : g.outer_sizes;
    auto& strides = reduced[d] ? g.inner_strides : g.outer_strides;
    sizes.push_back(in.size(d));
    strides.push_back(in.stride(d));
    (reduced[d] ? g.n_in : g.n_out) *= in.size(d);
  }
  if (merge) {
    coalesce(g.outer_sizes, g.outer_strides);
    coalesce(g.inner_sizes, g.inner_strides);
  }
  g.in = static_cast<const char*>(in.const_data_ptr());
  return g;
}

int64_t offset_of(int64_t linear, const Dims& sizes, const Dims& strides) {
  int64_t offset = 0;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    offset += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return offset;
}

template <typename T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

template <typename T>
struct SumOp {
  using acc_t = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  static acc_t identity() { return 0; }
  static acc_t step(acc_t acc, T x) { return acc + static_cast<acc_t>(x); }
  static acc_t combine(acc_t a, acc_t b) { return a + b; }
};

template <typename T>
struct MaxOp {
  using acc_t = T;
  static acc_t identity() {
    if constexpr (std::is_floating_point_v<T>) {
      return -std::numeric_limits<T>::infinity();
    } else {
      return std::numeric_limits<T>::lowest();
    }
  }
  // NaN propagates, as in torch.max / torch.amax.
  static acc_t step(acc_t acc, T x) { return (x > acc || is_nan(x)) && !is_nan(acc) ? x : acc; }
  static acc_t combine(acc_t a, acc_t b) { return step(a, b); }
};

// Sum of a contiguous float run. float lanes vectorise 4-8x better than
// widening every element to double; short blocks keep their rounding error
// small and the block sums are added in double. Each lane is its own scalar
// accumulator and they are combined in a fixed order, so every clone (picked
// at load time: the baseline build targets SSE2 only) rounds alike. 64 lanes
// are four AVX-512 or eight AVX2 registers: enough independent additions to
// hide the adder's latency and keep up with loads from L2.
__attribute__((target_clones("avx512f", "avx2", "default")))
double sum_contiguous_f32(const float* p, int64_t n) {
  constexpr int64_t kBlock = 4096;
  constexpr int kLanes = 64;
  double total = 0;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t stop = std::min(n, start + kBlock);
    float lanes[kLanes] = {};
    int64_t i = start;
    for (; i + kLanes <= stop; i += kLanes) {
      // Unrolled, so the lanes live in registers: at -O2 gcc would keep them in memory.
#pragma GCC unroll kLanes
      for (int k = 0; k < kLanes; ++k) lanes[k] += p[i + k];
    }
    for (; i < stop; ++i) lanes[0] += p[i];
    for (float lane : lanes) total += lane;
  }
  return total;
}

// Reduces the inner elements [begin, end) (linear, inner space) below `base`.
template <typename Op, typename T>
typename Op::acc_t reduce_inner(const ReduceGeometry& g, const T* base, int64_t begin, int64_t end) {
  using acc_t = typename Op::acc_t;
  if (g.inner_sizes.size() == 1) {
    const int64_t stride = g.inner_strides[0];
    if constexpr (std::is_same_v<Op, SumOp<float>>) {
      if (stride == 1) {
        return sum_contiguous_f32(base + begin, end - begin);
      }
    }
    if (stride == 1) {
      // Independent lanes let the compiler vectorise without reassociating.
      constexpr int kLanes = 8;
      acc_t lanes[kLanes];
      for (auto& lane : lanes) lane = Op::identity();
      int64_t i = begin;
      for (; i + kLanes <= end; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) lanes[k] = Op::step(lanes[k], base[i + k]);
      }
      for (; i < end; ++i) lanes[0] = Op::step(lanes[0], base[i]);
      acc_t acc = lanes[0];
      for (int k = 1; k < kLanes; ++k) acc = Op::combine(acc, lanes[k]);
      return acc;
    }
    acc_t acc = Op::identity();
    for (int64_t i = begin; i < end; ++i) acc = Op::step(acc, base[i * stride]);
    return acc;
  }
  acc_t acc = Op::identity();
  for (int64_t i = begin; i < end; ++i) {
    acc = Op::step(acc, base[offset_of(i, g.inner_sizes, g.inner_strides)]);
  }
  return acc;
}

// out[o] = finish(reduce over inner space), parallel over outputs, or over
// the inner space for a full reduction.
template <typename Op, typename T, typename out_t, typename Finish>
void reduce_kernel(const ReduceGeometry& g, Finish finish) {
  using acc_t = typename Op::acc_t;
  const T* in = reinterpret_cast<const T*>(g.in);
  out_t* out = reinterpret_cast<out_t*>(g.out);
  if (g.n_out == 1) {
    // Partial results are combined in index order, not in the order the
    // threads finish, so a sum rounds the same way on every run.
    std::mutex mutex;
    c10::SmallVector<std::pair<int64_t, acc_t>, kMaxChunks> parts;
    parallel_range(g.n_in, kParallelGrain, [&](int64_t begin, int64_t end) {
      const acc_t part = reduce_inner<Op>(g, in, begin, end);
      std::lock_guard<std::mutex> lock(mutex);
      parts.emplace_back(begin, part);
    });
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    acc_t total = Op::identity();
    for (const auto& part : parts) {
      total = Op::combine(total, part.second);
    }
    out[0] = finish(total);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, g.n_in));
  parallel_range(g.n_out, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* base = in + offset_of(o, g.outer_sizes, g.outer_strides);
      out[o] = finish(reduce_inner<Op>(g, base, 0, g.n_in));
    }
  });
}

template <typename T>
void argmax_kernel(const ReduceGeometry& g) {
  const T* in = reinterpret_cast<const T*>(g.in);
  T* values = reinterpret_cast<T*>(g.out);
  int64_t* indices = reinterpret_cast<int64_t*>(g.index);
  const int64_t stride = g.inner_strides.empty() ? 0 : g.inner_strides[0];
  parallel_range(g.n_out, std::max<int64_t>(1, kParallelGrain / g.n_in), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* base = in + offset_of(o, g.outer_sizes, g.outer_strides);
      T best = base[0];
      int64_t best_index = 0;
      // First maximum wins; a NaN is the maximum (first NaN).
      for (int64_t i = 1; i < g.n_in && !is_nan(best); ++i) {
        const T x = base[i * stride];
        if (x > best || is_nan(x)) {
          best = x;
          best_index = i;
        }
      }
      values[o] = best;
      indices[o] = best_index;
    }
  });
}

// The reduced-dims mask and the keepdim-shaped output size.
std::bitset<64> reduced_mask(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  const int64_t ndim = self.dim();
  std::bitset<64> mask;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t d = 0; d < ndim; ++d) mask.set(d);
    return mask;
  }
  return at::dim_list_to_bitset(*dims, ndim);
}

at::DimVector keepdim_shape(const at::Tensor& self, const std::bitset<64>& mask) {
  at::DimVector shape(self.sizes().begin(), self.sizes().end());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[d]) shape[d] = 1;
  }
  return shape;
}

at::Tensor finish_shape(const at::Tensor& result, const at::Tensor& self, const std::bitset<64>& mask,
                        bool keepdim) {
  if (keepdim) return result;
  at::DimVector shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) shape.push_back(self.size(d));
  }
  return result.view(shape);
}

} // namespace

// [native-reduce]
std::optional<at::Tensor> run_reduce(ReduceKind kind, const at::Tensor& self,
                                     at::OptionalIntArrayRef dims, bool keepdim,
                                     std::optional<c10::ScalarType> dtype) {
  if (!native_kernels_enabled() || !is_native_tensor(self) || self.dim() > 64) {
    return std::nullopt;
  }
  c10::ScalarType compute = self.scalar_type();
  if (kind == ReduceKind::Sum) {
    // Integral sums accumulate and return int64, as in torch.sum.
    compute = dtype.value_or(c10::isIntegralType(compute, true) ? c10::kLong : compute);
    if (!is_native_dtype(compute) || compute == c10::kBool || compute == c10::kInt) return std::nullopt;
  } else if (kind == ReduceKind::Mean) {
    compute = dtype.value_or(compute);
    if (!is_native_float(compute)) return std::nullopt;  // integral mean raises: fallback says so
  } else if (self.numel() == 0) {
    return std::nullopt;  // max of nothing raises: fallback says so
  }
  const std::bitset<64> mask = reduced_mask(self, dims);
  const at::Tensor input = self.scalar_type() == compute ? self : self.to(compute);
  at::Tensor result = at::empty(keepdim_shape(self, mask), self.options().dtype(compute));
  if (result.numel() > 0) {
    ReduceGeometry g = make_geometry(input, mask, /*merge=*/true);
    g.out = static_cast<char*>(result.mutable_data_ptr());
    const double count = static_cast<double>(g.n_in);
    launch_kernel(self.device().index(), [g, kind, compute, count]() {
      if (kind == ReduceKind::Max) {
        OPENREG_DISPATCH_NATIVE_TYPES(compute, "openreg_max", [&] {
          reduce_kernel<MaxOp<scalar_t>, scalar_t, scalar_t>(g, [](scalar_t acc) { return acc; });
        });
      } else {
        OPENREG_DISPATCH_NATIVE_NUMBERS(compute, "openreg_sum", [&] {
          using acc_t = typename SumOp<scalar_t>::acc_t;
          const bool mean = kind == ReduceKind::Mean;
          reduce_kernel<SumOp<scalar_t>, scalar_t, scalar_t>(g, [mean, count](acc_t acc) {
            // mean of nothing is NaN, as 0/0 on CPU.
            return static_cast<scalar_t>(mean ? static_cast<double>(acc) / count : acc);
          });
        });
      }
    });
  }
  return finish_shape(result, self, mask, keepdim);
}
// [/native-reduce]

std::optional<std::tuple<at::Tensor, at::Tensor>> run_max_dim(const at::Tensor& self, int64_t dim,
                                                               bool keepdim) {
  if (!native_kernels_enabled() || !is_native_tensor(self) || self.dim() > 64) {
    return std::nullopt;
  }
  dim = c10::maybe_wrap_dim(dim, self.dim());
  if (self.dim() > 0 && self.size(dim) == 0) {
    return std::nullopt;  // raises in the fallback
  }
  std::bitset<64> mask;
  if (self.dim() > 0) mask.set(dim);
  at::Tensor values = at::empty(keepdim_shape(self, mask), self.options());
  at::Tensor indices = at::empty(keepdim_shape(self, mask), self.options().dtype(c10::kLong));
  if (values.numel() > 0) {
    ReduceGeometry g = make_geometry(self, mask, /*merge=*/false);
    g.out = static_cast<char*>(values.mutable_data_ptr());
    g.index = static_cast<char*>(indices.mutable_data_ptr());
    const c10::ScalarType dtype = self.scalar_type();
    launch_kernel(self.device().index(), [g, dtype]() {
      OPENREG_DISPATCH_NATIVE_TYPES(dtype, "openreg_max_dim", [&] { argmax_kernel<scalar_t>(g); });
    });
  }
  return std::make_tuple(finish_shape(values, self, mask, keepdim), finish_shape(indices, self, mask, keepdim));
}

} // namespace openreg::native
