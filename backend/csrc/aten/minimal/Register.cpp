#include <torch/library.h>

#include "aten/minimal/Minimal.h"
#include "runtime/OpenRegDeviceAllocator.h"

namespace openreg::minimal {

namespace {
// Tensor.record_stream(): without it the call would reach the CPU fallback.
void record_stream(at::Tensor& self, c10::Stream stream) {
  openreg::device_allocator().recordStream(self.storage().data_ptr(), stream);
}
} // namespace

// [minimal-registration]
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("_reshape_alias", TORCH_FN(_reshape_alias));
  m.impl("view", TORCH_FN(view));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_Storage_storage_offset_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_Storage_));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_Tensor_));
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(_local_scalar_dense));
  m.impl("record_stream", TORCH_FN(record_stream));
}
// [/minimal-registration]

} // namespace openreg::minimal
