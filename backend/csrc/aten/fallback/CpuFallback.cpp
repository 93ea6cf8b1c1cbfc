#include "aten/fallback/CpuFallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "compat/TorchVersion.h"
#include "runtime/OpenRegGenerator.h"

#if !OPENREG_TORCH_VERSION_AT_LEAST(2, 10)
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#endif

namespace openreg::fallback {

namespace {

void note_device(std::optional<c10::Device>& device, const at::Tensor& t,
                 const c10::OperatorName& name) {
  if (!t.defined() || !t.device().is_privateuseone()) {
    return;
  }
  if (!device.has_value()) {
    device = t.device();
    return;
  }
  // The CPU fallback would happily mix devices; a real backend must not.
  TORCH_CHECK(*device == t.device(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              *device, " and ", t.device(), "! (when checking arguments for ", name, ")");
}

// The openreg device all tensor arguments live on, if any.
std::optional<c10::Device> common_device(const c10::OperatorHandle& op,
                                         c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  const auto& name = op.schema().operator_name();
  for (const auto& iv : args) {
    if (iv.isTensor()) {
      note_device(device, iv.toTensor(), name);
    } else if (iv.isTensorList()) {
      for (const at::Tensor& t : iv.toTensorList()) {
        note_device(device, t, name);
      }
    } else if (iv.isOptionalTensorList()) {
      for (const std::optional<at::Tensor> t : iv.toOptionalTensorList()) {
        if (t.has_value()) {
          note_device(device, *t, name);
        }
      }
    }
  }
  return device;
}

bool is_generator_argument(const c10::Argument& arg) {
  c10::TypePtr type = arg.real_type();
  if (auto optional = type->cast<c10::OptionalType>()) {
    type = optional->getElementType();
  }
  return type->kind() == c10::TypeKind::GeneratorType;
}

} // namespace

// [cpu-fallback]
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  auto args = torch::jit::last(*stack, arguments.size());
  const auto device = common_device(op, args);
  if (device.has_value()) {
    // CPU kernels would silently draw from the CPU default generator; hand
    // them the engine of the openreg generator instead (explicit or default).
    for (size_t i = 0; i < arguments.size(); ++i) {
      if (!is_generator_argument(arguments[i])) {
        continue;
      }
      c10::IValue& iv = (*stack)[stack->size() - arguments.size() + i];
      const std::optional<at::Generator> gen =
          iv.isNone() ? std::nullopt : std::make_optional(iv.toGenerator());
      iv = openreg::cpu_generator_for(gen, device->index());
    }
  }
  at::native::cpu_fallback(op, stack);
}
// [/cpu-fallback]

// Hand-written: a boxed fallback for every op is beyond torchgen's backend
// YAML (docs/codegen.md).
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

// COMPAT(>= 2.10): torch registers the autograd fallback for AutogradPrivateUse1
// itself (aten/src/ATen/core/VariableFallbackKernel.cpp, PR #165315). 2.9 has it
// for every other Autograd key but not this one, so an op with no autograd
// kernel (c10d::allreduce_ and the other collectives) fails on openreg tensors
// with "Could not run ... from the 'Autogradopenreg' backend". Register the same
// fallback the other keys get. CAN REMOVE the #if when MIN_SUPPORTED >= 2.10.
#if !OPENREG_TORCH_VERSION_AT_LEAST(2, 10)
TORCH_LIBRARY_IMPL(_, AutogradPrivateUse1, m) {
  m.fallback(torch::autograd::basicAutogradNotImplementedFallback());
}
#endif

} // namespace openreg::fallback
