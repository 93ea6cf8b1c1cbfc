#pragma once

// Template half of Binary.h, included by the kernel translation units only.

#include "aten/native/binary/Binary.h"
#include "aten/launch/Elementwise.h"

namespace openreg::native::detail {

template <typename T, typename F>
void launch_binary_functor(const at::TensorIteratorBase& iter, const BinaryOperand& a,
                           const BinaryOperand& b, F f) {
  using out_t = decltype(f(T{}, T{}));
  if (b.is_scalar) {
    const T value = b.scalar.to<T>();
    launch_elementwise<out_t, T>(iter, [f, value](T x) { return f(x, value); });
  } else if (a.is_scalar) {
    const T value = a.scalar.to<T>();
    launch_elementwise<out_t, T>(iter, [f, value](T y) { return f(value, y); });
  } else {
    launch_elementwise<out_t, T, T>(iter, f);
  }
}

} // namespace openreg::native::detail
