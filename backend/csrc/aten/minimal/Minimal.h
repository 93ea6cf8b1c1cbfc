// The minimal operator set every PrivateUse1 backend must provide: tensor
// creation, metadata-only views, storage (re)binding, and the copies that move
// bytes between host and device. Everything else may fall back to the CPU.
// The kernels are members of the generated OpenRegNativeFunctions
// (PrivateUse1NativeFunctions.h, from csrc/aten/native_functions.yaml).
#pragma once

#include <c10/core/ScalarType.h>

namespace openreg::native {

// Throws TypeError for dtypes the backend does not store (quantized, bit
// packed, ...): a clear error instead of a later crash in a kernel.
void check_supported_dtype(c10::ScalarType dtype);

} // namespace openreg::native
