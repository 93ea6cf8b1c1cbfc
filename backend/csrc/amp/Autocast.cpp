// Autocast for openreg (torch.autocast("openreg")) with CUDA's policy:
// matmul-like ops run in the autocast dtype (float16/bfloat16), numerically
// sensitive ones in float32, mixed-input ones in the widest input dtype,
// binary_cross_entropy is refused; every other op falls through the
// AutocastPrivateUse1 key untouched.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <c10/util/SmallVector.h>

#include <memory>
#include <mutex>

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

// [autocast-policy]
// ATen's cast policies applied by one boxed kernel to every listed op: the
// same helpers KERNEL_PRIVATEUSEONE's wrappers use (is_eligible, prioritize,
// cached_cast), in a loop over the op's arguments on the stack instead of one
// template per op. ~115 per-op wrappers and their boxing code were a sixth of
// the ATen layer's compile (docs/build.md); the price is one boxing round
// trip per op under autocast. The argument kinds follow the wrappers'
// overloads: Tensor, Tensor? and Tensor[] are cast; Tensor?[] (index_put's
// indices) and everything else pass through; only Tensor and Tensor[] take
// part in promote's widest-type search; a ScalarType? left unset becomes
// float32 under fp32_set_opt_dtype.
using at::autocast::CastPolicy;
constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;

enum class ArgKind : uint8_t { kOther, kTensor, kOptionalTensor, kTensorList, kOptionalScalarType };

ArgKind kind_of(const c10::Argument& arg) {
  const c10::TypePtr& type = arg.real_type();
  if (type->kind() == c10::TypeKind::TensorType) {
    return ArgKind::kTensor;
  }
  if (type->kind() == c10::TypeKind::ListType &&
      type->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType) {
    return ArgKind::kTensorList;
  }
  if (type->kind() == c10::TypeKind::OptionalType) {
    const auto element = type->expectRef<c10::OptionalType>().getElementType()->kind();
    if (element == c10::TypeKind::TensorType) {
      return ArgKind::kOptionalTensor;
    }
    if (element == c10::TypeKind::ScalarTypeType) {
      return ArgKind::kOptionalScalarType;
    }
  }
  return ArgKind::kOther;
}

using ArgKinds = c10::SmallVector<ArgKind, 8>;

class AutocastKernel final : public c10::OperatorKernel {
 public:
  explicit AutocastKernel(CastPolicy policy) : policy_(policy) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastPrivateUse1);
    // Each kernel is registered for one op: its argument kinds are read once.
    std::call_once(kinds_read_, [&] {
      for (const auto& arg : op.schema().arguments()) {
        kinds_.push_back(kind_of(arg));
      }
    });
    const ArgKinds& kinds = kinds_;
    c10::IValue* args = stack->data() + (stack->size() - kinds.size());
    const auto lower = at::autocast::get_lower_precision_fp_from_device_type(kDevice);
    switch (policy_) {
      case CastPolicy::lower_precision_fp:
        cast_all(kinds, args, lower);
        break;
      case CastPolicy::fp32:
        cast_all(kinds, args, at::kFloat);
        break;
      case CastPolicy::fp32_set_opt_dtype:
        if (args[0].isTensor() && at::autocast::is_eligible(args[0].toTensor(), kDevice)) {
          for (size_t i = 0; i < kinds.size(); ++i) {
            if (kinds[i] == ArgKind::kOptionalScalarType && args[i].isNone()) {
              args[i] = c10::IValue(at::kFloat);
            }
          }
        }
        break;
      case CastPolicy::promote:
        cast_all(kinds, args, widest(kinds, args, lower));
        break;
      default:
        TORCH_CHECK(false, "openreg autocast: no boxed form of this cast policy for ", op.schema().name());
    }
    op.callBoxed(stack);
  }

 private:
  static at::ScalarType widest(const ArgKinds& kinds, const c10::IValue* args, at::ScalarType current) {
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (kinds[i] == ArgKind::kTensor) {
        current = at::autocast::prioritize(current, args[i].toTensor(), kDevice);
      } else if (kinds[i] == ArgKind::kTensorList) {
        for (const at::Tensor t : args[i].toTensorList()) {
          current = at::autocast::prioritize(current, t, kDevice);
        }
      }
    }
    return current;
  }

  static void cast_all(const ArgKinds& kinds, c10::IValue* args, at::ScalarType to) {
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (kinds[i] == ArgKind::kTensor || (kinds[i] == ArgKind::kOptionalTensor && args[i].isTensor())) {
        args[i] = at::autocast::cached_cast(to, args[i].toTensor(), kDevice);
      } else if (kinds[i] == ArgKind::kTensorList) {
        c10::List<at::Tensor> cast;
        for (const at::Tensor t : args[i].toTensorList()) {
          cast.push_back(at::autocast::cached_cast(to, t, kDevice));
        }
        args[i] = std::move(cast);
      }
    }
  }

  const CastPolicy policy_;
  std::once_flag kinds_read_;
  ArgKinds kinds_;
};

torch::CppFunction autocast_kernel(CastPolicy policy) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutocastKernel>(policy));
}

// An op of ATen's lists by its name: _(op) or _(op, overload).
#define OPENREG_OP_NAME_1(OP) "aten::" #OP
#define OPENREG_OP_NAME_2(OP, OVERLOAD) "aten::" #OP "." #OVERLOAD
#define OPENREG_OP_NAME_PICK(_1, _2, NAME, ...) NAME
#define OPENREG_OP_NAME(...) OPENREG_OP_NAME_PICK(__VA_ARGS__, OPENREG_OP_NAME_2, OPENREG_OP_NAME_1)(__VA_ARGS__)
// [/autocast-policy]

// Hand-written, not in native_functions.yaml: torchgen generates no autocast
// wrappers, and the list is version-dependent (docs/codegen.md).
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Lower precision: convolutions and the GEMM family, where the speed-up lives.
#define OPENREG_LOWER_PRECISION_FP(...) m.impl(OPENREG_OP_NAME(__VA_ARGS__), autocast_kernel(CastPolicy::lower_precision_fp));
  AT_FORALL_LOWER_PRECISION_FP(OPENREG_LOWER_PRECISION_FP)
  // float32: ops whose range or accumulation suffers in 16 bits (asin, exp,
  // the norms and losses, ...).
#define OPENREG_FP32(...) m.impl(OPENREG_OP_NAME(__VA_ARGS__), autocast_kernel(CastPolicy::fp32));
  AT_FORALL_FP32(OPENREG_FP32)
  // float32 through the op's own dtype argument (softmax, sum, cumsum, ...).
#define OPENREG_FP32_SET_OPT_DTYPE(...) m.impl(OPENREG_OP_NAME(__VA_ARGS__), autocast_kernel(CastPolicy::fp32_set_opt_dtype));
  AT_FORALL_FP32_SET_OPT_DTYPE(OPENREG_FP32_SET_OPT_DTYPE)
  // float32 by redispatching to an overload that takes a dtype (norm): ATen's
  // typed wrapper, since the overload to call is not in the op's schema.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  // Widest input dtype.
#define OPENREG_PROMOTE(...) m.impl(OPENREG_OP_NAME(__VA_ARGS__), autocast_kernel(CastPolicy::promote));
  AT_FORALL_PROMOTE(OPENREG_PROMOTE)
  // Banned, as on CUDA: a float16 BCE silently loses the loss.
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy_banned));
}
// [/autocast-lists]

} // namespace
} // namespace openreg::amp
