// The minimal operator set every PrivateUse1 backend must provide: tensor
// creation, metadata-only views, storage (re)binding, and the copies that move
// bytes between host and device. Everything else may fall back to the CPU.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>

namespace openreg::minimal {

// Throws TypeError for dtypes the backend does not store (quantized, bit
// packed, ...): a clear error instead of a later crash in a kernel.
void check_supported_dtype(c10::ScalarType dtype);

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format);
at::Tensor empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory);

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> storage_offset);
at::Tensor _reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                          c10::SymIntArrayRef stride);
at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size);
const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_source_Storage_storage_offset_(
    at::Tensor& self, c10::Storage source, int64_t storage_offset,
    c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor& set_source_Storage_(at::Tensor& self, c10::Storage source);
at::Tensor& set_source_Tensor_(at::Tensor& self, const at::Tensor& source);

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor _copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
c10::Scalar _local_scalar_dense(const at::Tensor& self);

} // namespace openreg::minimal
