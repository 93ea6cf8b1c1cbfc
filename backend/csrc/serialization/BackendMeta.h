// Backend-specific tensor metadata that survives torch.save/torch.load.
//
// Real accelerators keep e.g. an internal storage format next to the tensor
// (torch_npu's NZ format). openreg keeps one such flag, `nz_format`, so the
// serialization hooks are exercised end to end.
#pragma once

#include <ATen/core/Tensor.h>

namespace openreg::serialization {

void set_nz_format(const at::Tensor& t, bool value);
bool nz_format(const at::Tensor& t);

} // namespace openreg::serialization
