#pragma once

// Elementwise kernels over the geometry TensorIterator computes on the host.
// TensorIterator is used for metadata only (broadcast shape, dim order,
// coalescing, byte strides); the loops below run inside the kernel.
//
// Only the innermost row loop is a template. The geometry, the launch and the
// walk over rows are compiled once (Elementwise.cpp) and reach the row loop
// through a function pointer: with ~200 (op, dtype, operand form)
// instantiations, templating the whole launch chain made these kernels the
// bulk of a cold build, and the indirect call per row costs nothing next to a
// row (a contiguous operand is one row).

#include "aten/launch/Launch.h"

#include <ATen/TensorIterator.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace openreg::native {

// Operands of one elementwise kernel: the output, then up to three inputs.
constexpr int kMaxElementwiseArgs = 4;
// Room for the functor's captures (host scalars).
constexpr std::size_t kMaxFunctorBytes = 32;

// Runs one row of n elements. ptrs and strides (bytes) hold one entry per
// operand; functor points at the kernel's functor.
using ElementwiseRow = void (*)(const void* functor, char* const* ptrs, const int64_t* strides,
                                int64_t n);

// Launches row over every row of iter on the current stream of the output's
// device, with a copy of the functor's bytes that lives as long as the kernel.
void launch_elementwise_rows(const at::TensorIteratorBase& iter, ElementwiseRow row,
                             const void* functor, std::size_t functor_size);

namespace detail {

template <typename out_t, typename... in_t, typename F, std::size_t... I>
inline void elementwise_row(const F& f, char* const* ptrs, const int64_t* strides, int64_t n,
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

template <typename F, typename out_t, typename... in_t>
void erased_elementwise_row(const void* functor, char* const* ptrs, const int64_t* strides,
                            int64_t n) {
  elementwise_row<out_t, in_t...>(*static_cast<const F*>(functor), ptrs, strides, n,
                                  std::index_sequence_for<in_t...>{});
}

} // namespace detail

// Launches out = f(in...) over iter (operand 0 the output, then the inputs,
// with exactly these dtypes) on the current stream of the output's device.
template <typename out_t, typename... in_t, typename F>
void launch_elementwise(const at::TensorIteratorBase& iter, F f) {
  static_assert(sizeof...(in_t) + 1 <= kMaxElementwiseArgs, "too many operands");
  // The functor travels as bytes to the worker thread.
  static_assert(std::is_trivially_copyable_v<F> && std::is_trivially_destructible_v<F>,
                "an elementwise functor may capture host scalars only");
  static_assert(sizeof(F) <= kMaxFunctorBytes && alignof(F) <= alignof(std::max_align_t),
                "elementwise functor captures too much");
  launch_elementwise_rows(iter, &detail::erased_elementwise_row<F, out_t, in_t...>, &f, sizeof(F));
}

} // namespace openreg::native
