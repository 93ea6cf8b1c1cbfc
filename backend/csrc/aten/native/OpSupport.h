#pragma once

// Host-side helpers shared by the native kernels: which tensors the kernels
// take, how an op falls back to the CPU, and the dtype dispatch they share.

#include "aten/launch/KernelConfig.h"

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/Scalar.h>

#include <utility>

namespace openreg::native {

// The dtypes with native kernels; everything else goes to the CPU fallback.
inline bool is_native_dtype(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kDouble || t == c10::kLong || t == c10::kInt ||
      t == c10::kBool;
}

inline bool is_native_float(c10::ScalarType t) {
  return t == c10::kFloat || t == c10::kDouble;
}

// A 0-dim CPU tensor (a Python number, or a CPU scalar tensor): PyTorch lets
// these mix with device tensors, so kernels take them as host constants.
inline bool is_host_scalar(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.dim() == 0;
}

// A device tensor a native kernel can read or write directly.
inline bool is_native_tensor(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() && t.layout() == c10::kStrided &&
      is_native_dtype(t.scalar_type()) && !t.is_neg() && !t.is_conj();
}

// Raises PyTorch's usual error when two device tensors are on different
// devices: the fallback would otherwise silently compute on the CPU.
void check_same_device(const at::Tensor& a, const at::Tensor& b);

// Boxed CPU fallback (at::native::cpu_fallback behind the backend's global
// fallback checks) that counts the call; also usable directly in
// m.impl(..., makeFromBoxedFunction<&counted_cpu_fallback>()).
void counted_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Routes one op from an unboxed kernel to the CPU fallback.
template <class Op, class... Args>
decltype(auto) cpu_fallback_op(Args&&... args) {
  return at::native::call_fallback_fn<&counted_cpu_fallback, Op>::call(std::forward<Args>(args)...);
}

} // namespace openreg::native

#define OPENREG_DISPATCH_NATIVE_TYPES(TYPE, NAME, ...)                 \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                      \
      AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__)                       \
      AT_DISPATCH_CASE(at::kDouble, __VA_ARGS__)                      \
      AT_DISPATCH_CASE(at::kLong, __VA_ARGS__)                        \
      AT_DISPATCH_CASE(at::kInt, __VA_ARGS__)                         \
      AT_DISPATCH_CASE(at::kBool, __VA_ARGS__))

#define OPENREG_DISPATCH_NATIVE_NUMBERS(TYPE, NAME, ...)               \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                      \
      AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__)                       \
      AT_DISPATCH_CASE(at::kDouble, __VA_ARGS__)                      \
      AT_DISPATCH_CASE(at::kLong, __VA_ARGS__)                        \
      AT_DISPATCH_CASE(at::kInt, __VA_ARGS__))

#define OPENREG_DISPATCH_NATIVE_FLOATS(TYPE, NAME, ...)                \
  AT_DISPATCH_SWITCH(TYPE, NAME,                                      \
      AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__)                       \
      AT_DISPATCH_CASE(at::kDouble, __VA_ARGS__))
