// Copies between host and device and within the device.
//
// Device memory is only accessible inside kernels, so every byte moves either
// through the runtime's memcpy or inside a kernel on the current stream. The
// host waits for the stream unless the copy is non_blocking from/to pinned
// memory, in which case the pinned block is marked in use by the stream.
#include "aten/minimal/Minimal.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>

#include <vector>

#include "runtime/OpenRegDeviceAllocator.h"
#include "runtime/OpenRegFunctions.h"
#include "runtime/OpenRegHostAllocator.h"
#include "runtime/OpenRegLaunch.h"
#include "runtime/OpenRegStream.h"

namespace openreg::native {

namespace {

// What a kernel needs to alias device memory as a CPU tensor: plain values.
// A kernel must not capture the Tensor itself: dropping the last reference on
// the stream's worker may decref its Python object, which takes the GIL,
// while the host thread holds the GIL waiting for that stream.
struct DeviceView {
  void* data;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype;

  explicit DeviceView(const at::Tensor& t)
      : data(t.data_ptr()), sizes(t.sizes().vec()), strides(t.strides().vec()), dtype(t.scalar_type()) {}

  // A CPU tensor aliasing the device memory: only valid inside a kernel.
  at::Tensor alias_as_cpu() const {
    return at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype).device(c10::DeviceType::CPU));
  }
};

bool memcpy_compatible(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.is_contiguous() &&
      b.is_contiguous();
}

// Leaves the stream running when the host side is pinned memory we can tag;
// otherwise waits, because pageable host memory may be reused on return.
void finish_host_copy(const at::Tensor& host, rtStream_t stream, c10::DeviceIndex device,
                      bool non_blocking) {
  if (non_blocking &&
      host_record_stream(host.storage().data(), host.storage().data_ptr().get_context(),
                         getCurrentStream(device).unwrap())) {
    return;
  }
  OPENREG_CHECK(rtStreamSynchronize(stream));
}

// [device-copy]
// dst <- src on the same device: any dtype, strides, broadcast. The math is
// CPU copy_ run inside a kernel on aliases of the device memory.
void device_copy(const at::Tensor& dst, const at::Tensor& src) {
  const auto device = dst.device().index();
  openreg::launch_kernel(getCurrentRawStream(device), [dst = DeviceView(dst), src = DeviceView(src)] {
    dst.alias_as_cpu().copy_(src.alias_as_cpu());
  });
}
// [/device-copy]

void copy_h2d(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const auto device = dst.device().index();
  const c10::DeviceGuard guard(dst.device());
  if (memcpy_compatible(src, dst)) {
    const rtStream_t stream = getCurrentRawStream(device);
    OPENREG_CHECK(rtMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                rtMemcpyHostToDevice, stream));
    finish_host_copy(src, stream, device, non_blocking);
    return;
  }
  // Convert/broadcast on the host, then scatter into dst's layout on device.
  const at::Tensor staged = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  if (dst.is_contiguous()) {
    copy_h2d(staged, dst, false);
    return;
  }
  const at::Tensor tmp = at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  copy_h2d(staged, tmp, false);
  device_copy(dst, tmp);
}

void copy_d2h(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const auto device = src.device().index();
  const c10::DeviceGuard guard(src.device());
  if (memcpy_compatible(src, dst)) {
    const rtStream_t stream = getCurrentRawStream(device);
    OPENREG_CHECK(rtMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(),
                                rtMemcpyDeviceToHost, stream));
    finish_host_copy(dst, stream, device, non_blocking);
    return;
  }
  const at::Tensor dense = src.is_contiguous() ? src : src.contiguous();
  const at::Tensor tmp = at::empty(dense.sizes(), dense.options().device(c10::DeviceType::CPU));
  copy_d2h(dense, tmp, false);
  dst.copy_(tmp);
}

} // namespace

// [copy-from]
at::Tensor OpenRegNativeFunctions::_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  if (dst.numel() == 0) {
    return dst;
  }
  const bool src_dev = self.device().is_privateuseone();
  const bool dst_dev = dst.device().is_privateuseone();
  if (src_dev && dst_dev) {
    if (self.device() == dst.device()) {
      const c10::DeviceGuard guard(dst.device());
      device_copy(dst, self);
    } else {
      // Across devices: through the host. Rare, and keeps ordering obvious.
      const at::Tensor host = at::empty(self.sizes(), self.options().device(c10::DeviceType::CPU));
      copy_d2h(self, host, false);
      copy_h2d(host, dst, false);
    }
  } else if (dst_dev) {
    TORCH_CHECK(self.is_cpu(), "openreg: cannot copy from ", self.device(), " to ", dst.device());
    copy_h2d(self, dst, non_blocking);
  } else {
    TORCH_CHECK(dst.is_cpu(), "openreg: cannot copy from ", self.device(), " to ", dst.device());
    copy_d2h(self, dst, non_blocking);
  }
  return dst;
}
// [/copy-from]

at::Tensor OpenRegNativeFunctions::_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().is_privateuseone()) {
    resize__symint(dst, c10::fromIntArrayRefSlow(self.sizes()), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return _copy_from(self, dst, false);
}

c10::Scalar OpenRegNativeFunctions::_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  const at::Tensor host = at::empty(self.sizes(), self.options().device(c10::DeviceType::CPU));
  copy_d2h(self, host, false);
  return host.item();
}

// Tensor.record_stream(): without it the call would reach the CPU fallback.
void OpenRegNativeFunctions::record_stream(at::Tensor& self, c10::Stream s) {
  openreg::device_allocator().recordStream(self.storage().data_ptr(), s);
}

} // namespace openreg::native
