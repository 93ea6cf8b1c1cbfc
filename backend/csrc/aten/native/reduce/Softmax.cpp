// softmax / log_softmax and their backward kernels over one dim, on a
// contiguous [outer, dim, inner] view of the input.

#include "aten/launch/Launch.h"
#include "aten/native/OpSupport.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace openreg::native {
namespace {

using at::Tensor;

// Built without -ftrapping-math: with it GCC keeps the NaN/range selects
// below as branches and vectorises none of the loop. Only the row functions:
// code in such a region cannot inline functions (std::*) defined outside it.
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")

// exp(x) for float with plain arithmetic and bit operations only, so the
// row loop vectorises (libm's expf per element made the kernel ~10x slower
// than ATen's vectorised CPU softmax). Cephes' expf polynomial, about 1 ulp;
// 0 below -87.3 (expf underflows there too).
inline float vec_expf(float x) {
  const float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float low = x > -87.3f ? x : -87.3f;
  const float clamped = low < 88.7f ? low : 88.7f;
  const float shifted = clamped * 1.44269504088896341f + kMagic;
  const float n = shifted - kMagic;
  const int32_t ni = __builtin_bit_cast(int32_t, shifted) - __builtin_bit_cast(int32_t, kMagic);
  const float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float result = p * __builtin_bit_cast(float, (ni + 127) << 23);
  const float underflowed = x < -87.3f ? 0.0f : result;
  return x != x ? x : underflowed;
}

inline float row_exp(float x) { return vec_expf(x); }
inline double row_exp(double x) { return __builtin_exp(x); }
inline float row_log(float x) { return __builtin_logf(x); }
inline double row_log(double x) { return __builtin_log(x); }

// One contiguous row of softmax (log_softmax when `log`), in separate passes
// so that each is a simple vectorisable loop (max, exp, sum, scale).
template <typename T>
__attribute__((always_inline)) inline void softmax_row(const T* x, T* y, int64_t n, bool log) {
  constexpr int kLanes = 16;
  constexpr T kMinusInf = -static_cast<T>(__builtin_inf());
  T lanes[kLanes];
  for (T& lane : lanes) lane = kMinusInf;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] = x[j + k] > lanes[k] ? x[j + k] : lanes[k];
  }
  for (; j < n; ++j) lanes[0] = x[j] > lanes[0] ? x[j] : lanes[0];
  T max = lanes[0];
  for (T lane : lanes) max = lane > max ? lane : max;
  // All -inf: exp(x - 0) gives 0/0 = NaN as on CPU; +inf gives NaN too.
  if (max == kMinusInf) max = 0;
  for (j = 0; j < n; ++j) y[j] = row_exp(x[j] - max);
  for (T& lane : lanes) lane = 0;
  for (j = 0; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += y[j + k];
  }
  for (; j < n; ++j) lanes[0] += y[j];
  T sum = 0;
  for (T lane : lanes) sum += lane;
  if (log) {
    const T shift = max + row_log(sum);
    for (j = 0; j < n; ++j) y[j] = x[j] - shift;
  } else {
    const T scale = T(1) / sum;
    for (j = 0; j < n; ++j) y[j] *= scale;
  }
}

// The float row is cloned for AVX-512 and AVX2 (picked at load time) since the
// baseline build targets SSE2 only: ATen's CPU softmax runs at the machine's
// best width.
__attribute__((target_clones("avx512f", "avx2", "default")))
void contiguous_softmax_row(const float* x, float* y, int64_t n, bool log) {
  softmax_row(x, y, n, log);
}

void contiguous_softmax_row(const double* x, double* y, int64_t n, bool log) {
  softmax_row(x, y, n, log);
}

#pragma GCC pop_options

struct SoftmaxShape {
  int64_t outer = 1, dim = 1, inner = 1;
};

SoftmaxShape shape_of(const Tensor& t, int64_t dim) {
  SoftmaxShape s;
  if (t.dim() == 0) return s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) s.outer *= t.size(d);
    else if (d == dim) s.dim = t.size(d);
    else s.inner *= t.size(d);
  }
  return s;
}

// [native-softmax]
// Rows [begin, end) of the [outer, dim, inner] view; row r is (r / inner,
// r % inner) and its elements are `inner` apart.
template <typename T, bool kLog>
void softmax_rows(const T* in, T* out, SoftmaxShape s, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = (row / s.inner) * s.dim * s.inner + row % s.inner;
    if (s.inner == 1) {
      contiguous_softmax_row(in + base, out + base, s.dim, kLog);
      continue;
    }
    const T* x = in + base;
    T* y = out + base;
    const int64_t st = s.inner;
    T max = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < s.dim; ++j) max = x[j * st] > max ? x[j * st] : max;
    if (std::isinf(max) && max < 0) max = 0;
    T sum = 0;
    for (int64_t j = 0; j < s.dim; ++j) {
      y[j * st] = std::exp(x[j * st] - max);
      sum += y[j * st];
    }
    if constexpr (kLog) {
      const T shift = max + std::log(sum);
      for (int64_t k = 0; k < s.dim; ++k) y[k * st] = x[k * st] - shift;
    } else {
      const T scale = T(1) / sum;
      for (int64_t k = 0; k < s.dim; ++k) y[k * st] *= scale;
    }
  }
}

template <typename T, bool kLog>
void softmax_backward_rows(const T* grad, const T* output, T* grad_input, SoftmaxShape s, int64_t begin,
                           int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = (row / s.inner) * s.dim * s.inner + row % s.inner;
    const int64_t st = s.inner;
    T dot = 0;
    for (int64_t j = 0; j < s.dim; ++j) {
      dot += kLog ? grad[base + j * st] : grad[base + j * st] * output[base + j * st];
    }
    for (int64_t j = 0; j < s.dim; ++j) {
      const int64_t i = base + j * st;
      grad_input[i] = kLog ? grad[i] - std::exp(output[i]) * dot : output[i] * (grad[i] - dot);
    }
  }
}
// [/native-softmax]

int64_t row_grain(const SoftmaxShape& s) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, s.dim));
}

std::optional<Tensor> run_softmax(const Tensor& self, int64_t dim, bool half_to_float, bool log) {
  if (!native_kernels_enabled() || half_to_float || !is_native_tensor(self) || !is_native_float(self.scalar_type())) {
    return std::nullopt;
  }
  dim = c10::maybe_wrap_dim(dim, self.dim());
  const Tensor input = self.contiguous();
  Tensor out = at::empty(self.sizes(), self.options());
  if (out.numel() == 0) return out;
  const SoftmaxShape s = shape_of(self, dim);
  const void* in_ptr = input.const_data_ptr();
  void* out_ptr = out.mutable_data_ptr();
  const c10::ScalarType dtype = self.scalar_type();
  launch_kernel(self.device().index(), [=]() {
    OPENREG_DISPATCH_NATIVE_FLOATS(dtype, "openreg_softmax", [&] {
      const auto* x = static_cast<const scalar_t*>(in_ptr);
      auto* y = static_cast<scalar_t*>(out_ptr);
      parallel_range(s.outer * s.inner, row_grain(s), [&](int64_t b, int64_t e) {
        if (log) softmax_rows<scalar_t, true>(x, y, s, b, e);
        else softmax_rows<scalar_t, false>(x, y, s, b, e);
      });
    });
  });
  return out;
}

std::optional<Tensor> run_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim,
                                           c10::ScalarType input_dtype, bool log) {
  if (!native_kernels_enabled() || !is_native_tensor(grad) || !is_native_tensor(output) ||
      !is_native_float(output.scalar_type()) || grad.scalar_type() != output.scalar_type() ||
      input_dtype != output.scalar_type() || !grad.sizes().equals(output.sizes()) ||
      grad.device() != output.device()) {
    return std::nullopt;
  }
  dim = c10::maybe_wrap_dim(dim, output.dim());
  const Tensor g = grad.contiguous();
  const Tensor y = output.contiguous();
  Tensor grad_input = at::empty(output.sizes(), output.options());
  if (grad_input.numel() == 0) return grad_input;
  const SoftmaxShape s = shape_of(output, dim);
  const void* g_ptr = g.const_data_ptr();
  const void* y_ptr = y.const_data_ptr();
  void* gi_ptr = grad_input.mutable_data_ptr();
  const c10::ScalarType dtype = output.scalar_type();
  launch_kernel(output.device().index(), [=]() {
    OPENREG_DISPATCH_NATIVE_FLOATS(dtype, "openreg_softmax_backward", [&] {
      const auto* gp = static_cast<const scalar_t*>(g_ptr);
      const auto* yp = static_cast<const scalar_t*>(y_ptr);
      auto* gip = static_cast<scalar_t*>(gi_ptr);
      parallel_range(s.outer * s.inner, row_grain(s), [&](int64_t b, int64_t e) {
        if (log) softmax_backward_rows<scalar_t, true>(gp, yp, gip, s, b, e);
        else softmax_backward_rows<scalar_t, false>(gp, yp, gip, s, b, e);
      });
    });
  });
  return grad_input;
}

} // namespace

Tensor OpenRegNativeFunctions::_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  if (auto r = run_softmax(self, dim, half_to_float, false)) return *r;
  return cpu_fallback_op<at::_ops::_softmax>(self, dim, half_to_float);
}

Tensor OpenRegNativeFunctions::_log_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  if (auto r = run_softmax(self, dim, half_to_float, true)) return *r;
  return cpu_fallback_op<at::_ops::_log_softmax>(self, dim, half_to_float);
}

Tensor& OpenRegNativeFunctions::_softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (is_native_tensor(out) && out.scalar_type() == self.scalar_type()) {
    if (auto r = run_softmax(self, dim, half_to_float, false)) {
      at::native::resize_output(out, r->sizes());
      return out.copy_(*r);
    }
  }
  return cpu_fallback_op<at::_ops::_softmax_out>(self, dim, half_to_float, out);
}

Tensor& OpenRegNativeFunctions::_log_softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (is_native_tensor(out) && out.scalar_type() == self.scalar_type()) {
    if (auto r = run_softmax(self, dim, half_to_float, true)) {
      at::native::resize_output(out, r->sizes());
      return out.copy_(*r);
    }
  }
  return cpu_fallback_op<at::_ops::_log_softmax_out>(self, dim, half_to_float, out);
}

Tensor OpenRegNativeFunctions::_softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  if (auto r = run_softmax_backward(grad, output, dim, input_dtype, false)) return *r;
  return cpu_fallback_op<at::_ops::_softmax_backward_data>(grad, output, dim, input_dtype);
}

Tensor OpenRegNativeFunctions::_log_softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  if (auto r = run_softmax_backward(grad, output, dim, input_dtype, true)) return *r;
  return cpu_fallback_op<at::_ops::_log_softmax_backward_data>(grad, output, dim, input_dtype);
}

} // namespace openreg::native
