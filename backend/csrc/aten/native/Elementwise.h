#pragma once

// Elementwise kernels over the geometry TensorIterator computes on the host.
// TensorIterator is used for metadata only (broadcast shape, dim order,
// coalescing, byte strides); the loops below run inside the kernel.

#include "aten/native/Launch.h"

#include <ATen/TensorIterator.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace openreg::native {

// A host copy of the iterator's geometry: plain values that may travel to the
// worker thread. Dim 0 moves fastest.
template <int NARGS>
struct StridedGeometry {
  int64_t numel = 0;
  c10::SmallVector<int64_t, 6> shape;
  c10::SmallVector<std::array<int64_t, NARGS>, 6> strides;  // bytes, per dim
  std::array<char*, NARGS> data{};

  explicit StridedGeometry(const at::TensorIteratorBase& iter) {
    TORCH_INTERNAL_ASSERT(iter.ntensors() == NARGS, "geometry arity mismatch");
    numel = iter.numel();
    shape.assign(iter.shape().begin(), iter.shape().end());
    strides.resize(iter.ndim());
    for (int arg = 0; arg < NARGS; ++arg) {
      data[arg] = static_cast<char*>(iter.data_ptr(arg));
      auto arg_strides = iter.strides(arg);
      for (int dim = 0; dim < iter.ndim(); ++dim) {
        strides[dim][arg] = arg_strides[dim];
      }
    }
  }

  // Calls row(ptrs, inner_strides, n) for the rows covering linear indices
  // [begin, end) of the iteration space.
  template <typename Row>
  void for_each_row(int64_t begin, int64_t end, const Row& row) const {
    const int ndim = static_cast<int>(shape.size());
    if (ndim == 0) {
      std::array<int64_t, NARGS> zero{};
      row(data, zero, end - begin);
      return;
    }
    c10::SmallVector<int64_t, 6> counter(ndim);
    int64_t rest = begin;
    for (int d = 0; d < ndim; ++d) {
      counter[d] = rest % shape[d];
      rest /= shape[d];
    }
    int64_t index = begin;
    while (index < end) {
      std::array<char*, NARGS> ptrs = data;
      for (int d = 0; d < ndim; ++d) {
        for (int arg = 0; arg < NARGS; ++arg) {
          ptrs[arg] += counter[d] * strides[d][arg];
        }
      }
      const int64_t n = std::min(shape[0] - counter[0], end - index);
      row(ptrs, strides[0], n);
      index += n;
      counter[0] += n;
      for (int d = 0; d + 1 < ndim && counter[d] == shape[d]; ++d) {
        counter[d] = 0;
        ++counter[d + 1];
      }
    }
  }
};

// Below this many elements a second thread costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

namespace detail {

template <typename out_t, typename... in_t, typename F, size_t... I>
inline void elementwise_row(const F& f, const std::array<char*, sizeof...(in_t) + 1>& ptrs,
                            const std::array<int64_t, sizeof...(in_t) + 1>& strides, int64_t n,
                            std::index_sequence<I...>) {
  const bool contiguous = strides[0] == static_cast<int64_t>(sizeof(out_t)) &&
      ((strides[I + 1] == static_cast<int64_t>(sizeof(in_t))) && ...);
  if (contiguous) {
    // Separate loop so the compiler can vectorise the common case.
    out_t* out = reinterpret_cast<out_t*>(ptrs[0]);
    for (int64_t i = 0; i < n; ++i) {
      out[i] = f(reinterpret_cast<const in_t*>(ptrs[I + 1])[i]...);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<out_t*>(ptrs[0] + i * strides[0]) =
        f(*reinterpret_cast<const in_t*>(ptrs[I + 1] + i * strides[I + 1])...);
  }
}

} // namespace detail

// Launches out = f(in...) over iter (operand 0 the output, then the inputs,
// with exactly these dtypes) on the current stream of the output's device.
template <typename out_t, typename... in_t, typename F>
void launch_elementwise(const at::TensorIteratorBase& iter, F f) {
  constexpr int kArgs = sizeof...(in_t) + 1;
  if (iter.numel() == 0) {
    return;
  }
  StridedGeometry<kArgs> geometry(iter);
  launch_kernel(iter.device(0).index(), [geometry = std::move(geometry), f]() {
    parallel_range(geometry.numel, kParallelGrain, [&](int64_t begin, int64_t end) {
      geometry.for_each_row(begin, end, [&](const auto& ptrs, const auto& strides, int64_t n) {
        detail::elementwise_row<out_t, in_t...>(f, ptrs, strides, n,
                                                std::index_sequence_for<in_t...>{});
      });
    });
  });
}

} // namespace openreg::native
