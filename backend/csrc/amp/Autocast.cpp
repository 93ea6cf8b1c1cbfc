// Autocast for openreg (torch.autocast("openreg")) with CUDA's policy:
// matmul-like ops run in the autocast dtype (float16/bfloat16), numerically
// sensitive ones in float32, mixed-input ones in the widest input dtype,
// binary_cross_entropy is refused; every other op falls through the
// AutocastPrivateUse1 key untouched.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace openreg::amp {
namespace {

// The op lists name these types unqualified, as inside namespace at.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
// COMPAT(named tensors): torch 2.9's redispatch list has sum.dim_DimnameList; releases
// without named tensors have neither that entry nor ATen/core/Dimname.h, so the header's
// presence is the feature test. CAN REMOVE when MIN_SUPPORTED has no named tensors.
#if __has_include(<ATen/core/Dimname.h>)
using at::DimnameList;
#endif

// [autocast-fallthrough]
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}
// [/autocast-fallthrough]

// [autocast-lists]
// CUDA's policy, from the op lists ATen shares with every backend: the lists
// follow the installed torch, so an op CUDA autocasts in a new release is
// autocast here too.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

// Hand-written, not in native_functions.yaml: torchgen generates no autocast
// wrappers, and the list is version-dependent (docs/codegen.md).
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Lower precision: convolutions and the GEMM family, where the speed-up lives.
#define OPENREG_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(OPENREG_LOWER_PRECISION_FP)
  // float32: ops whose range or accumulation suffers in 16 bits (asin, exp,
  // the norms and losses, ...).
#define OPENREG_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(OPENREG_FP32)
  // float32 through the op's own dtype argument (softmax, sum, cumsum, ...).
#define OPENREG_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(OPENREG_FP32_SET_OPT_DTYPE)
  // float32 by redispatching to an overload that takes a dtype (norm).
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  // Widest input dtype.
#define OPENREG_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(OPENREG_PROMOTE)
  // Banned, as on CUDA: a float16 BCE silently loses the loss.
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy_banned));
}
// [/autocast-lists]

} // namespace
} // namespace openreg::amp
