#include "aten/native/OpSupport.h"

#include "aten/fallback/CpuFallback.h"

namespace openreg::native {

void check_same_device(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || is_host_scalar(a) || is_host_scalar(b)) {
    return;
  }
  TORCH_CHECK(a.device() == b.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              a.device(), " and ", b.device(), "!");
}

void counted_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  count_cpu_fallback();
  // The backend's boxed fallback: at::native::cpu_fallback plus the
  // same-device check and openreg generators for random ops.
  openreg::fallback::cpu_fallback(op, stack);
}

} // namespace openreg::native
