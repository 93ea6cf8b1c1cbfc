// The reduction loops are the hot path of all_reduce: plain loops over
// __restrict__ pointers, which gcc vectorises in the Release build (-O3).

#include "distributed/Reduce.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>

namespace openreg::distributed {

namespace {

template <typename T, typename Op>
void loop(void* dst_, const void* src_, size_t bytes, Op op) {
  auto* __restrict__ dst = static_cast<T*>(dst_);
  const auto* __restrict__ src = static_cast<const T*>(src_);
  const size_t n = bytes / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    dst[i] = op(dst[i], src[i]);
  }
}

// Half and BFloat16 reduce in float, one rounding per step (as gloo does).
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<c10::Half> {
  using type = float;
};
template <>
struct Acc<c10::BFloat16> {
  using type = float;
};

template <typename T>
ReduceFn make_typed(ReduceKind kind) {
  using A = typename Acc<T>::type;
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Avg:
      if constexpr (std::is_same_v<T, bool>) {
        return [](void* d, const void* s, size_t b) { loop<T>(d, s, b, [](T x, T y) { return x || y; }); };
      } else {
        return [](void* d, const void* s, size_t b) {
          loop<T>(d, s, b, [](T x, T y) { return static_cast<T>(static_cast<A>(x) + static_cast<A>(y)); });
        };
      }
    case ReduceKind::Product:
      if constexpr (std::is_same_v<T, bool>) {
        return [](void* d, const void* s, size_t b) { loop<T>(d, s, b, [](T x, T y) { return x && y; }); };
      } else {
        return [](void* d, const void* s, size_t b) {
          loop<T>(d, s, b, [](T x, T y) { return static_cast<T>(static_cast<A>(x) * static_cast<A>(y)); });
        };
      }
    case ReduceKind::Min:
      return [](void* d, const void* s, size_t b) {
        loop<T>(d, s, b, [](T x, T y) { return static_cast<A>(y) < static_cast<A>(x) ? y : x; });
      };
    case ReduceKind::Max:
      return [](void* d, const void* s, size_t b) {
        loop<T>(d, s, b, [](T x, T y) { return static_cast<A>(y) > static_cast<A>(x) ? y : x; });
      };
  }
  TORCH_CHECK(false, "occl: unknown reduction");
}

} // namespace

ReduceFn make_reduce(c10::ScalarType dtype, ReduceKind kind) {
  TORCH_CHECK(kind != ReduceKind::Avg || c10::isFloatingType(dtype),
              "occl: ReduceOp.AVG needs a floating-point tensor, got ", dtype);
  switch (dtype) {
    case c10::ScalarType::Float: return make_typed<float>(kind);
    case c10::ScalarType::Double: return make_typed<double>(kind);
    case c10::ScalarType::Half: return make_typed<c10::Half>(kind);
    case c10::ScalarType::BFloat16: return make_typed<c10::BFloat16>(kind);
    case c10::ScalarType::Char: return make_typed<int8_t>(kind);
    case c10::ScalarType::Byte: return make_typed<uint8_t>(kind);
    case c10::ScalarType::Short: return make_typed<int16_t>(kind);
    case c10::ScalarType::Int: return make_typed<int32_t>(kind);
    case c10::ScalarType::Long: return make_typed<int64_t>(kind);
    case c10::ScalarType::Bool: return make_typed<bool>(kind);
    default:
      TORCH_CHECK(false, "occl: reductions of ", dtype, " are not supported");
  }
}

void divide_by(void* data, size_t bytes, c10::ScalarType dtype, int divisor) {
  auto scale = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    using A = typename Acc<T>::type;
    const size_t n = bytes / sizeof(T);
    for (size_t i = 0; i < n; ++i) {
      p[i] = static_cast<T>(static_cast<A>(p[i]) / static_cast<A>(divisor));
    }
  };
  switch (dtype) {
    case c10::ScalarType::Float: return scale(static_cast<float*>(data));
    case c10::ScalarType::Double: return scale(static_cast<double*>(data));
    case c10::ScalarType::Half: return scale(static_cast<c10::Half*>(data));
    case c10::ScalarType::BFloat16: return scale(static_cast<c10::BFloat16*>(data));
    default:
      TORCH_CHECK(false, "occl: ReduceOp.AVG needs a floating-point tensor, got ", dtype);
  }
}

} // namespace openreg::distributed
