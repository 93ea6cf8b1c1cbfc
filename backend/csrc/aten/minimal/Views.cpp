// Metadata-only operators: none of them touches device memory, so they are
// safe to run on the host thread despite the runtime's memory protection.
#include "aten/minimal/Minimal.h"
#include "PrivateUse1NativeFunctions.h"

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>

namespace openreg::native {

namespace {
// Grows the storage through the hooks (a D2D copy on the current stream) when
// the new geometry needs more bytes than it holds.
void ensure_storage_bytes(const at::Tensor& self, size_t nbytes) {
  const auto& storage = self.storage();
  if (nbytes > storage.nbytes()) {
    const c10::DeviceGuard guard(self.device());
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(storage, nbytes);
  }
}
} // namespace

at::Tensor OpenRegNativeFunctions::as_strided_symint(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> storage_offset) {
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
      storage_offset.has_value()
          ? std::make_optional(storage_offset->guard_int(__FILE__, __LINE__))
          : std::nullopt);
}

at::Tensor OpenRegNativeFunctions::_reshape_alias_symint(const at::Tensor& self, c10::SymIntArrayRef size,
                          c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor OpenRegNativeFunctions::view_symint(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

// [resize]
const at::Tensor& OpenRegNativeFunctions::resize__symint(const at::Tensor& self, c10::SymIntArrayRef size_sym,
                          std::optional<c10::MemoryFormat> memory_format) {
  const auto size = C10_AS_INTARRAYREF_SLOW(size_sym);
  for (const auto s : size) {
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  }
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) {
    impl->set_sizes_contiguous(size);
    const size_t nbytes = at::detail::computeStorageNbytesContiguous(
        size, self.dtype().itemsize(), self.storage_offset());
    ensure_storage_bytes(self, nbytes);
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}
// [/resize]

at::Tensor& OpenRegNativeFunctions::set_(
    at::Tensor& self, c10::Storage source, int64_t storage_offset,
    c10::IntArrayRef size, c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1,
              "Attempted to set the storage of an openreg tensor to a storage on ",
              source.device());
  TORCH_CHECK(storage_offset >= 0, "Tensor: invalid storage offset ", storage_offset);
  auto* impl = self.unsafeGetTensorImpl();
  if (!self.storage().is_alias_of(source)) {
    impl->set_storage_keep_dtype(std::move(source));
  }
  impl->set_storage_offset(storage_offset);
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  ensure_storage_bytes(self, at::detail::computeStorageNbytes(
                                 self.sizes(), self.strides(), self.dtype().itemsize(),
                                 storage_offset));
  return self;
}

at::Tensor& OpenRegNativeFunctions::set_(at::Tensor& self, c10::Storage source) {
  const auto itemsize = self.dtype().itemsize();
  TORCH_CHECK(source.nbytes() % itemsize == 0, "Expected storage size (", source.nbytes(),
              " bytes) to be a multiple of the element size ", itemsize);
  const int64_t numel = static_cast<int64_t>(source.nbytes() / itemsize);
  return set_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& OpenRegNativeFunctions::set_(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) {
    return self;
  }
  return set_(self, source.storage(), source.storage_offset(),
                                            source.sizes(), source.strides());
}

} // namespace openreg::native
