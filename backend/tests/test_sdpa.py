"""scaled_dot_product_attention on openreg takes the overrideable fused path and
matches CPU's math path, forward and backward (bias, boolean mask, causal,
16-bit inputs); dropout is reproducible and its gradient is the true one."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE_MODULE, DEVICE_TYPE
from torch.nn.attention import SDPBackend, sdpa_kernel


def _inputs(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g).to(dtype) for _ in range(3)]


def _sdpa_with_grads(q, k, v, device, mask=None, **kw):
    leaves = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    m = None
    if mask is not None:
        m = mask.detach().to(device)
        if m.is_floating_point():
            m.requires_grad_()
    with sdpa_kernel([SDPBackend.MATH]) if device == "cpu" else _nothing():
        out = F.scaled_dot_product_attention(*leaves, attn_mask=m, **kw)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape).to(device)
    (out * weights).sum().backward()
    grads = [t.grad for t in leaves] + ([m.grad] if m is not None and m.requires_grad else [])
    return [t.detach().float().cpu() for t in (out, *grads)]


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_choice_is_overrideable_for_openreg_tensors():
    q, k, v = (t.to(DEVICE_TYPE) for t in _inputs(2, 3, 8, 4))
    assert torch._fused_sdp_choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    with torch.profiler.profile() as prof:
        F.scaled_dot_product_attention(q, k, v)
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in names


def test_sdpa_kernel_context_can_switch_to_math():
    q, k, v = (t.to(DEVICE_TYPE) for t in _inputs(1, 2, 4, 4))
    with sdpa_kernel([SDPBackend.MATH]):
        assert torch._fused_sdp_choice(q, k, v) == SDPBackend.MATH.value
        with torch.profiler.profile() as prof:
            out = F.scaled_dot_product_attention(q, k, v)
    assert "aten::_scaled_dot_product_fused_attention_overrideable" not in {e.name for e in prof.events()}
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(*(t.cpu() for t in (q, k, v))))


@pytest.mark.parametrize("case", ["plain", "causal", "float_bias", "broadcast_bias", "bool_mask", "three_dim",
                                  "cross_lengths"])
def test_forward_and_backward_match_cpu_math(case):
    shape = (3, 7, 8) if case == "three_dim" else (2, 3, 7, 8)
    q, k, v = _inputs(*shape)
    kw, mask = {}, None
    if case == "causal":
        kw["is_causal"] = True
    elif case == "float_bias":
        mask = torch.randn(2, 3, 7, 7)
    elif case == "broadcast_bias":
        mask = torch.randn(7, 7)
    elif case == "bool_mask":
        mask = torch.rand(2, 1, 7, 7) > 0.3
        mask[..., 0] = True  # no fully masked row
    elif case == "cross_lengths":
        k, v = k[:, :, :5], v[:, :, :5]
        mask = torch.randn(7, 5)
    got = _sdpa_with_grads(q, k, v, DEVICE_TYPE, mask, **kw)
    want = _sdpa_with_grads(q, k, v, "cpu", mask, **kw)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_explicit_scale_matches_cpu():
    q, k, v = _inputs(1, 2, 5, 4)
    got = _sdpa_with_grads(q, k, v, DEVICE_TYPE, scale=0.3)
    want = _sdpa_with_grads(q, k, v, "cpu", scale=0.3)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs_match_cpu(dtype):
    q, k, v = _inputs(2, 2, 16, 8, dtype=dtype)
    got = _sdpa_with_grads(q, k, v, DEVICE_TYPE, is_causal=True)
    want = _sdpa_with_grads(q, k, v, "cpu", is_causal=True)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=2e-2, atol=2e-2)


def test_direct_op_call_like_upstream_returns_the_documented_outputs():
    q, k, v = (t.to(DEVICE_TYPE) for t in _inputs(2, 2, 6, 4))
    bias = torch.randn(2, 2, 6, 6, device=DEVICE_TYPE)
    out, lse, _, _, max_q, max_k, seed, offset, _ = (
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, attn_bias=bias))
    assert lse.shape == (2, 2, 6) and lse.dtype == torch.float32 and (max_q, max_k) == (6, 6)
    scores = (q @ k.transpose(-2, -1)).cpu() / 2 + bias.cpu()
    torch.testing.assert_close(lse.cpu(), scores.logsumexp(-1))
    grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
        torch.ones_like(out), q, k, v, bias, [True, True, True, True], out, lse, None, None,
        max_q, max_k, 0.0, False, seed, offset)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape, bias.shape]


def test_dropout_is_reproducible_under_manual_seed_and_drops_about_p():
    q, k, v = (t.to(DEVICE_TYPE) for t in _inputs(2, 2, 32, 8))
    DEVICE_MODULE.manual_seed(5)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    DEVICE_MODULE.manual_seed(5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    c = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(a.cpu(), b.cpu())
    assert not torch.equal(a.cpu(), c.cpu())
    probs = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q, k, v, dropout_p=0.5, return_debug_mask=True)[-1].cpu()
    dropped = (probs == 0).float().mean().item()
    assert 0.4 < dropped < 0.6


def test_dropout_gradient_is_the_gradient_of_the_dropped_forward():
    """gradcheck with the dropout seed fixed per call: analytic backward == finite differences."""
    q, k, v = (t.double().to(DEVICE_TYPE).requires_grad_() for t in _inputs(1, 2, 4, 3))

    def attention(q, k, v):
        DEVICE_MODULE.manual_seed(11)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)

    assert torch.autograd.gradcheck(attention, (q, k, v), eps=1e-6, atol=1e-5)


def test_grouped_query_attention_takes_the_math_path():
    q = torch.randn(1, 4, 5, 8)
    k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    out = F.scaled_dot_product_attention(q.to(DEVICE_TYPE), k.to(DEVICE_TYPE), v.to(DEVICE_TYPE), enable_gqa=True)
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
