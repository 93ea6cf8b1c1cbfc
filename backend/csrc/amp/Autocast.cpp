// Autocast for openreg (torch.autocast("openreg")): matmul-like ops run in
// the autocast dtype (float16/bfloat16), numerically sensitive ones in
// float32, mixed-input ones in the widest input dtype; every other op falls
// through the AutocastPrivateUse1 key untouched.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace openreg::amp {
namespace {

// [autocast-fallthrough]
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}
// [/autocast-fallthrough]

// [autocast-lists]
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Lower precision: the GEMM family, where the speed-up lives.
  KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)

  // float32: ops whose range or accumulation suffers in 16 bits.
  KERNEL_PRIVATEUSEONE(exp, fp32)
  KERNEL_PRIVATEUSEONE(log, fp32)
  KERNEL_PRIVATEUSEONE(pow, Tensor_Scalar, fp32)
  KERNEL_PRIVATEUSEONE(mse_loss, fp32)

  // float32 through the op's own dtype argument.
  KERNEL_PRIVATEUSEONE(softmax, int, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(log_softmax, int, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(sum, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(sum, dim_IntList, fp32_set_opt_dtype)

  // Widest input dtype.
  KERNEL_PRIVATEUSEONE(addcmul, promote)
  KERNEL_PRIVATEUSEONE(addcdiv, promote)
  KERNEL_PRIVATEUSEONE(dot, promote)
}
// [/autocast-lists]

} // namespace
} // namespace openreg::amp
