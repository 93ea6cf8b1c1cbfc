#include "aten/launch/Elementwise.h"

#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace openreg::native {
namespace {

using Pointers = std::array<char*, kMaxElementwiseArgs>;
using Strides = std::array<int64_t, kMaxElementwiseArgs>;

// A host copy of the iterator's geometry: plain values that may travel to the
// worker thread. Dim 0 moves fastest.
struct Geometry {
  int64_t numel = 0;
  c10::SmallVector<int64_t, 6> shape;
  c10::SmallVector<Strides, 6> strides;  // bytes, per dim and operand
  Pointers data{};

  explicit Geometry(const at::TensorIteratorBase& iter) {
    const int nargs = iter.ntensors();
    TORCH_INTERNAL_ASSERT(nargs <= kMaxElementwiseArgs, "elementwise kernel with ", nargs, " operands");
    numel = iter.numel();
    shape.assign(iter.shape().begin(), iter.shape().end());
    strides.resize(iter.ndim(), Strides{});
    for (int arg = 0; arg < nargs; ++arg) {
      data[arg] = static_cast<char*>(iter.data_ptr(arg));
      auto arg_strides = iter.strides(arg);
      for (int dim = 0; dim < iter.ndim(); ++dim) {
        strides[dim][arg] = arg_strides[dim];
      }
    }
  }

  // Calls row for the rows covering linear indices [begin, end).
  void for_each_row(int64_t begin, int64_t end, ElementwiseRow row, const void* functor) const {
    const int ndim = static_cast<int>(shape.size());
    if (ndim == 0) {
      const Strides zero{};
      row(functor, data.data(), zero.data(), end - begin);
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
      Pointers ptrs = data;
      for (int d = 0; d < ndim; ++d) {
        for (int arg = 0; arg < kMaxElementwiseArgs; ++arg) {
          ptrs[arg] += counter[d] * strides[d][arg];
        }
      }
      const int64_t n = std::min(shape[0] - counter[0], end - index);
      row(functor, ptrs.data(), strides[0].data(), n);
      index += n;
      counter[0] += n;
      for (int d = 0; d + 1 < ndim && counter[d] == shape[d]; ++d) {
        counter[d] = 0;
        ++counter[d + 1];
      }
    }
  }
};

struct FunctorBytes {
  alignas(std::max_align_t) std::array<std::byte, kMaxFunctorBytes> bytes;
};

} // namespace

void launch_elementwise_rows(const at::TensorIteratorBase& iter, ElementwiseRow row,
                             const void* functor, std::size_t functor_size) {
  if (iter.numel() == 0) {
    return;
  }
  TORCH_INTERNAL_ASSERT(functor_size <= kMaxFunctorBytes);
  FunctorBytes f{};
  std::memcpy(f.bytes.data(), functor, functor_size);
  launch_kernel(iter.device(0).index(), [geometry = Geometry(iter), f, row]() {
    parallel_range(geometry.numel, kParallelGrain, [&](int64_t begin, int64_t end) {
      geometry.for_each_row(begin, end, row, f.bytes.data());
    });
  });
}

} // namespace openreg::native
