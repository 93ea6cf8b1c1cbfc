// A per-op CPU fallback: sub.Tensor is registered explicitly for PrivateUse1
// with the boxed CPU fallback, the way an out-of-tree backend opts single ops
// out of its kernels (while sub_.Tensor and sub.out stay native). Having one
// op that always takes this path also keeps the fallback itself under test.

#include "aten/native/OpSupport.h"

#include <torch/library.h>

namespace openreg::native {

// Hand-written: a boxed kernel, which torchgen's backend YAML cannot name
// (docs/codegen.md).
// [per-op-fallback]
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sub.Tensor", torch::CppFunction::makeFromBoxedFunction<&counted_cpu_fallback>());
}
// [/per-op-fallback]

} // namespace openreg::native
