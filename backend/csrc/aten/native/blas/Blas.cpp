// mm / addmm / bmm. Like a vendor backend calling its BLAS library, the
// kernel hands the device buffers to a GEMM: here ATen's CPU BLAS path, run
// inside the kernel on the worker thread over aliases of device memory (no
// copies, no host round trip).

#include "aten/launch/Launch.h"
#include "aten/native/OpSupport.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mm_ops.h>

#include <vector>

namespace openreg::native {
namespace {

using at::Tensor;

// What a kernel needs to see a device tensor as a CPU tensor: plain values.
struct DeviceBuffer {
  void* data;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype;

  explicit DeviceBuffer(const Tensor& t)
      : data(t.data_ptr()), sizes(t.sizes().vec()), strides(t.strides().vec()), dtype(t.scalar_type()) {}

  // Only valid inside a kernel, where device memory is mapped.
  Tensor alias() const {
    return at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype).device(c10::kCPU));
  }
};

// All operands native float tensors of one dtype, on one device, of `dim` dims.
bool native_gemm_operands(std::initializer_list<const Tensor*> tensors, int64_t dim) {
  if (!native_kernels_enabled()) return false;
  const Tensor& first = *tensors.begin()[0];
  for (const Tensor* t : tensors) {
    if (!is_native_tensor(*t) || !is_native_float(t->scalar_type()) || t->scalar_type() != first.scalar_type() ||
        t->device() != first.device() || t->dim() != dim) {
      return false;
    }
  }
  return true;
}

// [native-mm]
Tensor& mm_into(Tensor& out, const Tensor& self, const Tensor& mat2) {
  if (out.numel() == 0) return out;
  if (self.size(1) == 0) return out.zero_();
  launch_kernel(self.device().index(), [o = DeviceBuffer(out), a = DeviceBuffer(self), b = DeviceBuffer(mat2)]() {
    Tensor result = o.alias();
    at::mm_out(result, a.alias(), b.alias());
  });
  return out;
}
// [/native-mm]

bool mm_shapes_ok(const Tensor& self, const Tensor& mat2) {
  return self.size(1) == mat2.size(0);
}

bool addmm_ok(const Tensor& self, const Tensor& mat1, const Tensor& mat2) {
  if (!native_gemm_operands({&mat1, &mat2}, 2) || !mm_shapes_ok(mat1, mat2) || !is_native_tensor(self) ||
      self.scalar_type() != mat1.scalar_type() || self.device() != mat1.device() || self.dim() > 2) {
    return false;
  }
  return at::is_expandable_to(self.sizes(), {mat1.size(0), mat2.size(1)});
}

Tensor& addmm_into(Tensor& out, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  if (out.numel() == 0) return out;
  const Tensor bias = self.expand({mat1.size(0), mat2.size(1)});
  launch_kernel(self.device().index(), [o = DeviceBuffer(out), c = DeviceBuffer(bias), a = DeviceBuffer(mat1),
                                        b = DeviceBuffer(mat2), beta, alpha]() {
    Tensor result = o.alias();
    at::addmm_out(result, c.alias(), a.alias(), b.alias(), beta, alpha);
  });
  return out;
}

bool bmm_ok(const Tensor& self, const Tensor& mat2) {
  return native_gemm_operands({&self, &mat2}, 3) && self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1);
}

Tensor& bmm_into(Tensor& out, const Tensor& self, const Tensor& mat2) {
  if (out.numel() == 0) return out;
  launch_kernel(self.device().index(), [o = DeviceBuffer(out), a = DeviceBuffer(self), b = DeviceBuffer(mat2)]() {
    Tensor result = o.alias();
    at::bmm_out(result, a.alias(), b.alias());
  });
  return out;
}

} // namespace

Tensor OpenRegNativeFunctions::mm(const Tensor& self, const Tensor& mat2) {
  if (native_gemm_operands({&self, &mat2}, 2) && mm_shapes_ok(self, mat2)) {
    Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options());
    return mm_into(out, self, mat2);
  }
  return cpu_fallback_op<at::_ops::mm>(self, mat2);
}

Tensor& OpenRegNativeFunctions::mm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  if (native_gemm_operands({&self, &mat2, &out}, 2) && mm_shapes_ok(self, mat2) && !out.is_same(self) && !out.is_same(mat2)) {
    at::native::resize_output(out, {self.size(0), mat2.size(1)});
    return mm_into(out, self, mat2);
  }
  return cpu_fallback_op<at::_ops::mm_out>(self, mat2, out);
}

Tensor OpenRegNativeFunctions::addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const c10::Scalar& beta,
             const c10::Scalar& alpha) {
  if (addmm_ok(self, mat1, mat2)) {
    Tensor out = at::empty({mat1.size(0), mat2.size(1)}, mat1.options());
    return addmm_into(out, self, mat1, mat2, beta, alpha);
  }
  return cpu_fallback_op<at::_ops::addmm>(self, mat1, mat2, beta, alpha);
}

Tensor& OpenRegNativeFunctions::addmm_out(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  if (addmm_ok(self, mat1, mat2) && is_native_tensor(out) && out.scalar_type() == mat1.scalar_type() &&
      out.device() == mat1.device() && !out.is_same(mat1) && !out.is_same(mat2)) {
    if (out.is_same(self)) {
      // addmm_: CPU's addmm_out accepts self as the output too.
      if (!out.sizes().equals({mat1.size(0), mat2.size(1)})) {
        return cpu_fallback_op<at::_ops::addmm_out>(self, mat1, mat2, beta, alpha, out);
      }
    } else {
      at::native::resize_output(out, {mat1.size(0), mat2.size(1)});
    }
    return addmm_into(out, self, mat1, mat2, beta, alpha);
  }
  return cpu_fallback_op<at::_ops::addmm_out>(self, mat1, mat2, beta, alpha, out);
}

Tensor& OpenRegNativeFunctions::addmm_(Tensor& self, const Tensor& mat1, const Tensor& mat2, const c10::Scalar& beta,
                      const c10::Scalar& alpha) {
  return addmm_out(self, mat1, mat2, beta, alpha, self);
}

Tensor OpenRegNativeFunctions::bmm(const Tensor& self, const Tensor& mat2) {
  if (bmm_ok(self, mat2)) {
    Tensor out = at::empty({self.size(0), self.size(1), mat2.size(2)}, self.options());
    return bmm_into(out, self, mat2);
  }
  return cpu_fallback_op<at::_ops::bmm>(self, mat2);
}

Tensor& OpenRegNativeFunctions::bmm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  if (bmm_ok(self, mat2) && is_native_tensor(out) && out.scalar_type() == self.scalar_type() &&
      out.device() == self.device() && !out.is_same(self) && !out.is_same(mat2)) {
    at::native::resize_output(out, {self.size(0), self.size(1), mat2.size(2)});
    return bmm_into(out, self, mat2);
  }
  return cpu_fallback_op<at::_ops::bmm_out>(self, mat2, out);
}

} // namespace openreg::native
