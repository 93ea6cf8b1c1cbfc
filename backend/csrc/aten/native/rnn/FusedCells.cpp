// The fused LSTM and GRU cells. ATen's LSTMCell/GRUCell (and so nn.LSTM,
// nn.GRU and their *Cell modules) call _thnn_fused_lstm_cell /
// _thnn_fused_gru_cell for accelerators, as for CUDA, and these ops have no
// CPU kernel the fallback could forward to. Here they are composed of device
// ops (the pointwise ones are native kernels), below autograd: autograd's
// formula for the fused ops calls the *_backward kernels registered here,
// which read the workspace the forward saved. The workspace layout is
// CUDA's, so a trace or saved graph does not depend on the device.

#include "PrivateUse1NativeFunctions.h"

#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>

#include <optional>
#include <tuple>

namespace openreg::native {
namespace {

using at::Tensor;

void check_cell_shapes(const char* op, const Tensor& input_gates, const Tensor& hidden_gates,
                       const Tensor& state, int64_t gates) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes(), op,
              ": input_gates and hidden_gates must be 2-D and of the same size, got ",
              input_gates.sizes(), " and ", hidden_gates.sizes());
  TORCH_CHECK(state.dim() == 2 && state.size(0) == input_gates.size(0) &&
                  state.size(1) * gates == input_gates.size(1),
              op, ": expected the state of size [", input_gates.size(0), ", ",
              input_gates.size(1) / gates, "], got ", state.sizes());
}

} // namespace

// [fused-lstm-cell]
// gates = input_gates + hidden_gates (+ biases), cut into i, f, g, o:
//   cy = sigmoid(f) * cx + sigmoid(i) * tanh(g),  hy = sigmoid(o) * tanh(cy).
// Workspace: the activated gates [i f g o], what the backward needs.
std::tuple<Tensor, Tensor, Tensor> OpenRegNativeFunctions::_thnn_fused_lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                                   const Tensor& cx, const std::optional<Tensor>& input_bias,
                                                   const std::optional<Tensor>& hidden_bias) {
  check_cell_shapes("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4);
  Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) {
    TORCH_CHECK(hidden_bias.has_value() && hidden_bias->defined(),
                "_thnn_fused_lstm_cell: input_bias and hidden_bias must both be given or both be None");
    gates = gates + *input_bias + *hidden_bias;
  }
  auto chunks = gates.chunk(4, 1);
  Tensor i = chunks[0].sigmoid();
  Tensor f = chunks[1].sigmoid();
  Tensor g = chunks[2].tanh();
  Tensor o = chunks[3].sigmoid();
  Tensor cy = f * cx + i * g;
  Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// d/d(pre-activation gates) from the saved activations; d cx = d cy_total * f.
std::tuple<Tensor, Tensor, Tensor> OpenRegNativeFunctions::_thnn_fused_lstm_cell_backward_impl(const std::optional<Tensor>& grad_hy,
                                                            const std::optional<Tensor>& grad_cy,
                                                            const Tensor& cx, const Tensor& cy,
                                                            const Tensor& workspace, bool has_bias) {
  const bool has_ghy = grad_hy.has_value() && grad_hy->defined();
  const bool has_gcy = grad_cy.has_value() && grad_cy->defined();
  if (!has_ghy && !has_gcy) {
    return {Tensor(), Tensor(), Tensor()};
  }
  auto acts = workspace.chunk(4, 1);
  const Tensor& i = acts[0];
  const Tensor& f = acts[1];
  const Tensor& g = acts[2];
  const Tensor& o = acts[3];
  Tensor tanh_cy = cy.tanh();
  Tensor ghy = has_ghy ? *grad_hy : at::zeros_like(cy);
  Tensor gcy = ghy * o * (1 - tanh_cy * tanh_cy);
  if (has_gcy) gcy = gcy + *grad_cy;
  Tensor grad_gates = at::cat({gcy * g * i * (1 - i), gcy * cx * f * (1 - f), gcy * i * (1 - g * g),
                               ghy * tanh_cy * o * (1 - o)},
                              1);
  Tensor grad_cx = gcy * f;
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}
// [/fused-lstm-cell]

// [fused-gru-cell]
// r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r * h_n),
// hy = n + z * (hx - n), biases added to the input and hidden parts.
// Workspace: [r z i_n h_n hx], CUDA's layout.
std::tuple<Tensor, Tensor> OpenRegNativeFunctions::_thnn_fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                          const std::optional<Tensor>& input_bias,
                                          const std::optional<Tensor>& hidden_bias) {
  check_cell_shapes("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3);
  Tensor ig = input_gates;
  Tensor hg = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) {
    TORCH_CHECK(hidden_bias.has_value() && hidden_bias->defined(),
                "_thnn_fused_gru_cell: input_bias and hidden_bias must both be given or both be None");
    ig = ig + *input_bias;
    hg = hg + *hidden_bias;
  }
  auto in = ig.chunk(3, 1);
  auto hn = hg.chunk(3, 1);
  Tensor r = (in[0] + hn[0]).sigmoid();
  Tensor z = (in[1] + hn[1]).sigmoid();
  Tensor n = (in[2] + r * hn[2]).tanh();
  Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, in[2], hn[2], hx}, 1)};
}

// Returns the gradients of input_gates, hidden_gates, hx and the two biases.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> OpenRegNativeFunctions::_thnn_fused_gru_cell_backward(const Tensor& grad_hy,
                                                                           const Tensor& workspace,
                                                                           bool has_bias) {
  auto saved = workspace.chunk(5, 1);
  const Tensor& r = saved[0];
  const Tensor& z = saved[1];
  const Tensor& i_n = saved[2];
  const Tensor& h_n = saved[3];
  const Tensor& hx = saved[4];
  Tensor n = (i_n + r * h_n).tanh();
  Tensor grad_z = grad_hy * (hx - n) * z * (1 - z);
  Tensor grad_n = grad_hy * (1 - z) * (1 - n * n);
  Tensor grad_r = grad_n * h_n * r * (1 - r);
  Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  Tensor grad_hidden_gates = at::cat({grad_r, grad_z, grad_n * r}, 1);
  Tensor grad_hx = grad_hy * z;
  Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}
// [/fused-gru-cell]

} // namespace openreg::native
