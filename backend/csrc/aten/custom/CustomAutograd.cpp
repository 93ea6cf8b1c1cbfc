// Autograd for the openreg custom ops, each a C++ torch::autograd::Function
// registered as the op's Autograd kernel: the forward redispatches below
// autograd to the backend kernel, the backward is written out by hand.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sgn.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/threshold_backward.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace openreg::native {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// [custom-op-autograd]
class CustomAbsFunction : public torch::autograd::Function<CustomAbsFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& input) {
    ctx->save_for_backward({input});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("openreg::custom_abs", "")
                         .typed<Tensor(const Tensor&)>();
    return op.call(input);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const Tensor input = ctx->get_saved_variables()[0];
    // d|x|/dx = sgn(x), 0 at 0 (the subgradient torch.abs uses too).
    return {at::mul(grad_outputs[0], at::sgn(input))};
  }
};

Tensor custom_abs_autograd(const Tensor& input) {
  return CustomAbsFunction::apply(input);
}
// [/custom-op-autograd]

// [autograd-function]
// relu(x @ w.T + b) with its own backward: the gradient reuses the saved
// output as the relu mask, so no pre-activation tensor is kept alive.
class LinearReluFunction : public torch::autograd::Function<LinearReluFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& input, const Tensor& weight,
                        const std::optional<Tensor>& bias) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("openreg::linear_relu", "")
                         .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&)>();
    Tensor output = op.call(input, weight, bias);
    ctx->save_for_backward({input, weight, output});
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& input = saved[0];
    const Tensor& weight = saved[1];
    const Tensor& output = saved[2];
    const Tensor grad = at::threshold_backward(grad_outputs[0], output, 0);
    Tensor grad_input = at::mm(grad, weight);
    Tensor grad_weight = at::mm(grad.t(), input);
    Tensor grad_bias = ctx->saved_data["has_bias"].toBool() ? at::sum(grad, {0}) : Tensor();
    return {grad_input, grad_weight, grad_bias};
  }
};

Tensor linear_relu_autograd(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  return LinearReluFunction::apply(input, weight, bias);
}
// [/autograd-function]

TORCH_LIBRARY_IMPL(openreg, Autograd, m) {
  m.impl("custom_abs", TORCH_FN(custom_abs_autograd));
  m.impl("linear_relu", TORCH_FN(linear_relu_autograd));
}

} // namespace
} // namespace openreg::native
