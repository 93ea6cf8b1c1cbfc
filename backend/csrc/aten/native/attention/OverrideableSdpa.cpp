// scaled_dot_product_attention's "overrideable" fused path, the one PyTorch
// reserves for out-of-tree backends: the SDPA composite asks the backend's
// _fused_sdp_choice_stub which implementation to use, and on OVERRIDEABLE calls
// _scaled_dot_product_fused_attention_overrideable (autograd then calls its
// _backward). Both are composed of device ops (the matmuls and the pointwise
// ops are native kernels), with the math path's numerics: scores and softmax in
// float32 for 16-bit inputs, a top-left causal mask, dropout on the
// probabilities. The backward recomputes the probabilities from the saved
// logsumexp and the dropout mask from the saved seed.

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros_like.h>

#include "runtime/OpenRegGenerator.h"
#include "PrivateUse1NativeFunctions.h"

#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <tuple>

namespace openreg::native {
namespace {

using at::Tensor;

double softmax_scale(const Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

// Scores in float32 (the math path upcasts 16-bit inputs too), with the bias
// or boolean mask and the causal mask applied.
Tensor attention_scores(const Tensor& q, const Tensor& k, const std::optional<Tensor>& attn_bias, bool is_causal,
                        double scale) {
  Tensor scores = q.matmul(k.transpose(-2, -1)) * scale;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    Tensor keep = at::ones({L, S}, q.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), neg_inf);
  }
  if (attn_bias.has_value() && attn_bias->defined()) {
    if (attn_bias->scalar_type() == at::kBool) {
      scores = scores.masked_fill(attn_bias->logical_not(), neg_inf);
    } else {
      scores = scores + attn_bias->to(scores.scalar_type());
    }
  }
  return scores;
}

// The dropout keep-mask scaled by 1/(1-p), drawn from a CPU generator seeded
// with `seed`, so the backward redraws exactly the forward's mask.
Tensor dropout_scale(const Tensor& like, double dropout_p, int64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  Tensor keep = at::empty(like.sizes(), like.options().device(c10::kCPU)).bernoulli_(1.0 - dropout_p, gen);
  return (keep / (1.0 - dropout_p)).to(like.device());
}

// A fresh seed for one attention call from the device's generator, so
// torch.openreg.manual_seed makes dropout reproducible.
int64_t draw_dropout_seed(c10::Device device) {
  at::Generator gen = cpu_generator_for(std::nullopt, device.index());
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<int64_t>(gen.get<at::CPUGeneratorImpl>()->random64() >> 1);
}

} // namespace

// [sdp-choice]
// OVERRIDEABLE unless the user switched it off (torch.nn.attention.sdpa_kernel)
// or asked for grouped-query attention, which the math path handles. Called
// directly (torch._fused_sdp_choice), the op answers as the stub does.
int64_t OpenRegNativeFunctions::_fused_sdp_choice(const Tensor& query, const Tensor& key, const Tensor& value,
                           const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                           std::optional<double> scale, bool enable_gqa) {
  const bool same_heads = query.dim() < 3 || query.size(-3) == key.size(-3);
  if (at::globalContext().userEnabledOverrideableSDP() && same_heads && !query.is_nested() &&
      (query.dim() == 3 || query.dim() == 4)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  TORCH_CHECK(at::globalContext().userEnabledMathSDP(),
              "openreg: no scaled_dot_product_attention backend is enabled that supports these inputs");
  return static_cast<int64_t>(at::SDPBackend::math);
}
// [/sdp-choice]

// [sdpa-overrideable]
std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> OpenRegNativeFunctions::_scaled_dot_product_fused_attention_overrideable(
    const Tensor& query, const Tensor& key, const Tensor& value, const std::optional<Tensor>& attn_bias,
    double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(query.dim() == 3 || query.dim() == 4, "openreg: scaled_dot_product_attention expects 3-D or 4-D query");
  const auto compute_type = at::isReducedFloatingType(query.scalar_type()) ? at::kFloat : query.scalar_type();
  Tensor scores = attention_scores(query.to(compute_type), key.to(compute_type), attn_bias, is_causal,
                                   softmax_scale(query, scale));
  Tensor lse = scores.logsumexp(-1);
  Tensor probs = (scores - lse.unsqueeze(-1)).exp();
  int64_t seed = 0;
  if (dropout_p > 0) {
    seed = draw_dropout_seed(query.device());
    probs = probs * dropout_scale(probs, dropout_p, seed);
  }
  Tensor out = probs.matmul(value.to(compute_type)).to(query.scalar_type());
  if (query.dim() == 3) lse = lse.unsqueeze(0);  // (B, H, L), as the meta function says
  const auto cpu_long = at::TensorOptions().dtype(at::kLong);
  return {out,
          lse.to(at::kFloat),
          Tensor(),
          Tensor(),
          c10::SymInt(query.size(-2)),
          c10::SymInt(key.size(-2)),
          at::scalar_tensor(seed, cpu_long),
          at::scalar_tensor(0, cpu_long),
          return_debug_mask ? probs.to(query.scalar_type()) : Tensor()};
}

// dV = P'^T dO; dP' = dO V^T; dP = dP' * dropout; dS = P * (dP - rowsum(dP * P));
// dQ = dS K * scale; dK = dS^T Q * scale; the bias gets dS, summed over what it broadcast.
std::tuple<Tensor, Tensor, Tensor, Tensor> OpenRegNativeFunctions::_scaled_dot_product_fused_attention_overrideable_backward_symint(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out, const Tensor& logsumexp, const Tensor& cum_seq_q,
    const Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale) {
  if (!grad_out.defined()) {
    return {};  // the output did not reach the loss: no gradients (autograd passes undefined)
  }
  const auto compute_type = at::isReducedFloatingType(query.scalar_type()) ? at::kFloat : query.scalar_type();
  const double s = softmax_scale(query, scale);
  Tensor q = query.to(compute_type), k = key.to(compute_type), v = value.to(compute_type);
  Tensor d_out = grad_out.to(compute_type);
  std::optional<Tensor> bias = attn_bias.defined() ? std::optional<Tensor>(attn_bias) : std::nullopt;
  Tensor scores = attention_scores(q, k, bias, is_causal, s);
  Tensor lse = logsumexp.to(compute_type).view(query.sizes().slice(0, query.dim() - 1));
  Tensor probs = (scores - lse.unsqueeze(-1)).exp();
  Tensor dropped = probs;
  Tensor d_probs = d_out.matmul(v.transpose(-2, -1));
  if (dropout_p > 0) {
    Tensor mask = dropout_scale(probs, dropout_p, philox_seed.item<int64_t>());
    dropped = probs * mask;
    d_probs = d_probs * mask;
  }
  Tensor d_scores = probs * (d_probs - (d_probs * probs).sum(-1, /*keepdim=*/true));
  Tensor grad_q = grad_input_mask[0] ? (d_scores.matmul(k) * s).to(query.scalar_type()) : Tensor();
  Tensor grad_k = grad_input_mask[1] ? (d_scores.transpose(-2, -1).matmul(q) * s).to(key.scalar_type()) : Tensor();
  Tensor grad_v = grad_input_mask[2] ? dropped.transpose(-2, -1).matmul(d_out).to(value.scalar_type()) : Tensor();
  Tensor grad_bias;
  if (grad_input_mask[3] && attn_bias.defined() && attn_bias.is_floating_point()) {
    grad_bias = d_scores.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  }
  return {grad_q, grad_k, grad_v, grad_bias};
}
// [/sdpa-overrideable]

} // namespace openreg::native

// [sdpa-registration]
// The SDPA composite asks the stub (not the op) for its choice. The macro
// names the stub's type by its unqualified name, hence at::native.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &openreg::native::OpenRegNativeFunctions::_fused_sdp_choice)
} // namespace at::native
// [/sdpa-registration]
