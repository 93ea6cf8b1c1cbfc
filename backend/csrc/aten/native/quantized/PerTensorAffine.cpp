// Per-tensor affine quantized tensors (qint8 / quint8) on the device.
//
// A quantized openreg tensor is a QTensorImpl over ordinary device memory,
// with the QuantizedPrivateUse1 key: its bytes are the integer
// representation, its quantizer holds scale and zero point. Quantize and
// dequantize are composed of device ops over an integer view of that memory;
// the few QuantizedPrivateUse1 ops below are what creating, reading and
// moving such a tensor needs (quantized arithmetic is not provided).

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_make_per_tensor_quantized_tensor.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

#include <limits>

namespace openreg::native {
namespace {

using at::Tensor;

bool is_supported_qtype(c10::ScalarType t) {
  return t == c10::kQInt8 || t == c10::kQUInt8;
}

// The integer representation of a quantized tensor, as a plain tensor over the
// same memory (no copy), on the tensor's device.
Tensor integer_view(const Tensor& q) {
  const auto key = q.device().is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1;
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(q.storage()), c10::DispatchKeySet(key),
      caffe2::TypeMeta::fromScalarType(c10::toUnderlying(q.scalar_type())));
  impl->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return Tensor(std::move(impl));
}

// Wraps a contiguous device tensor of integers as a quantized tensor sharing its memory.
Tensor wrap_as_quantized(const Tensor& ints, double scale, int64_t zero_point, c10::ScalarType qtype) {
  auto impl = c10::make_intrusive<at::QTensorImpl>(
      c10::Storage(ints.storage()), c10::DispatchKeySet(c10::DispatchKey::QuantizedPrivateUse1),
      caffe2::TypeMeta::fromScalarType(qtype), at::make_per_tensor_affine_quantizer(scale, zero_point, qtype));
  impl->set_sizes_contiguous(ints.sizes());
  return Tensor(std::move(impl));
}

template <typename T>
std::pair<int64_t, int64_t> range_of() {
  return {std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
}

// [quantize-per-tensor]
// q = clamp(round(x * (1 / scale) + zero_point), qmin, qmax) in float32,
// rounding half to even: CPU's kernel, step by step, so the integers match it
// bit for bit (x / scale, or adding the zero point after rounding, would not
// at ties). Dequantize gives (q - zero_point) * scale.
Tensor quantize_per_tensor(const Tensor& self, double scale, int64_t zero_point, c10::ScalarType dtype) {
  TORCH_CHECK(is_supported_qtype(dtype), "openreg: quantize_per_tensor supports torch.qint8 and torch.quint8, got ",
              dtype);
  TORCH_CHECK(self.is_floating_point(), "openreg: quantize_per_tensor expects a floating point tensor, got ",
              self.scalar_type());
  TORCH_CHECK(scale > 0, "openreg: quantize_per_tensor expects a positive scale, got ", scale);
  const auto [qmin, qmax] = dtype == c10::kQInt8 ? range_of<int8_t>() : range_of<uint8_t>();
  TORCH_CHECK(zero_point >= qmin && zero_point <= qmax, "openreg: zero_point ", zero_point,
              " is out of range for ", dtype);
  Tensor ints = (self.to(c10::kFloat) * (1.0 / scale))
                    .add(zero_point)
                    .round()
                    .clamp(qmin, qmax)
                    .to(c10::toUnderlying(dtype))
                    .contiguous();
  return wrap_as_quantized(ints, scale, zero_point, dtype);
}

Tensor dequantize(const Tensor& self) {
  TORCH_CHECK(self.qscheme() == c10::kPerTensorAffine, "openreg: only per-tensor affine tensors dequantize, got ",
              c10::toString(self.qscheme()));
  return (integer_view(self).to(c10::kFloat) - self.q_zero_point()) * self.q_scale();
}
// [/quantize-per-tensor]

Tensor int_repr(const Tensor& self) {
  return integer_view(self).clone();
}

// Moves between devices keep the integer representation and the parameters.
Tensor quantized_to_copy(const Tensor& self, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                         std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!dtype.has_value() || *dtype == self.scalar_type(),
              "openreg: a quantized tensor cannot change dtype with .to(); dequantize it first");
  TORCH_CHECK(self.qscheme() == c10::kPerTensorAffine, "openreg: only per-tensor affine tensors can be copied");
  const c10::Device target = device.value_or(self.device());
  Tensor ints = integer_view(self).to(target, /*non_blocking=*/false, /*copy=*/true).contiguous();
  if (target.is_cpu()) {
    return at::_make_per_tensor_quantized_tensor(ints, self.q_scale(), self.q_zero_point());
  }
  TORCH_CHECK(target.is_privateuseone(), "openreg: cannot copy a quantized tensor to ", target);
  return wrap_as_quantized(ints, self.q_scale(), self.q_zero_point(), self.scalar_type());
}

// Into a quantized device tensor (e.g. from a CPU one, through _to_copy on
// CPU): the integer representation is copied and the parameters taken over.
Tensor& quantized_copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  TORCH_CHECK(src.is_quantized() && src.scalar_type() == self.scalar_type() &&
                  src.qscheme() == c10::kPerTensorAffine,
              "openreg: copy_ into a quantized tensor needs a per-tensor quantized source of the same dtype");
  integer_view(self).copy_(integer_view(src), non_blocking);
  at::set_quantizer_(self, at::make_per_tensor_affine_quantizer(src.q_scale(), src.q_zero_point(),
                                                                src.scalar_type()));
  return self;
}

// Hand-written (docs/codegen.md): a second dispatch key, QuantizedPrivateUse1,
// which one gen_backend_stubs YAML cannot target besides PrivateUse1, and
// ATen's own at::native kernels registered as they are.
// [quantized-registration]
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", TORCH_FN(quantize_per_tensor));
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("dequantize.self", TORCH_FN(dequantize));
  m.impl("int_repr", TORCH_FN(int_repr));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
  m.impl("_to_copy", TORCH_FN(quantized_to_copy));
  m.impl("copy_", TORCH_FN(quantized_copy_));
}
// [/quantized-registration]

} // namespace
} // namespace openreg::native
