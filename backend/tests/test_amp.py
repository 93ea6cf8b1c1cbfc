"""Autocast on openreg (AutocastPrivateUse1): matmuls in the lower precision
dtype, float32 ops in float32, everything else untouched; values as CPU's
autocast gives them."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE_MODULE, DEVICE_TYPE


LOWER = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", LOWER)
def test_matmul_family_runs_in_the_autocast_dtype(dtype):
    a, b = torch.randn(8, 4), torch.randn(4, 3)
    bias = torch.randn(3)
    ad, bd, biasd = a.to(DEVICE_TYPE), b.to(DEVICE_TYPE), bias.to(DEVICE_TYPE)
    with torch.autocast(DEVICE_TYPE, dtype=dtype):
        outs = {
            "mm": ad @ bd,
            "addmm": torch.addmm(biasd, ad, bd),
            "linear": torch.nn.functional.linear(ad, bd.t(), biasd),
            "bmm": torch.bmm(ad[None], bd[None]),
        }
    for name, out in outs.items():
        assert out.dtype == dtype, name
    expected = (a.to(dtype) @ b.to(dtype)).float()
    torch.testing.assert_close(outs["mm"].float().cpu(), expected)


def test_float32_policy_ops_upcast():
    x = torch.randn(6).to(DEVICE_TYPE)
    with torch.autocast(DEVICE_TYPE, dtype=torch.bfloat16):
        h = x @ torch.eye(6, device=DEVICE_TYPE)  # bfloat16
        assert h.dtype == torch.bfloat16
        assert torch.exp(h).dtype == torch.float32
        assert torch.softmax(h, 0).dtype == torch.float32
        assert h.sum().dtype == torch.float32


def test_ops_outside_the_lists_fall_through_unchanged():
    x = torch.randn(5).to(DEVICE_TYPE)
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
        y = x + 1
        z = torch.relu(x)
    assert y.dtype == torch.float32 and z.dtype == torch.float32


def test_autocast_disabled_and_outside_scope():
    a = torch.randn(3, 3).to(DEVICE_TYPE)
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16, enabled=False):
        assert (a @ a).dtype == torch.float32
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
        assert torch.is_autocast_enabled(DEVICE_TYPE)
        with torch.autocast(DEVICE_TYPE, enabled=False):
            assert (a @ a).dtype == torch.float32
    assert not torch.is_autocast_enabled(DEVICE_TYPE)
    assert (a @ a).dtype == torch.float32


def test_autocast_does_not_touch_cpu_tensors():
    a = torch.randn(3, 3)
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
        assert (a @ a).dtype == torch.float32


def test_default_autocast_dtype_is_supported_by_the_device_module():
    dtype = torch.get_autocast_dtype(DEVICE_TYPE)
    assert dtype in DEVICE_MODULE.get_amp_supported_dtype()
    with torch.autocast(DEVICE_TYPE):
        out = torch.ones(2, 2, device=DEVICE_TYPE) @ torch.ones(2, 2, device=DEVICE_TYPE)
    assert out.dtype == dtype


def test_backward_through_autocast_gives_float32_grads():
    w = torch.randn(4, 4, device=DEVICE_TYPE, requires_grad=True)
    x = torch.randn(2, 4, device=DEVICE_TYPE)
    with torch.autocast(DEVICE_TYPE, dtype=torch.bfloat16):
        loss = (x @ w).float().pow(2).sum()
    loss.backward()
    assert w.grad.dtype == torch.float32
    w_cpu = w.detach().cpu().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = (x.cpu() @ w_cpu).float().pow(2).sum()
    ref.backward()
    torch.testing.assert_close(w.grad.cpu(), w_cpu.grad, rtol=2e-2, atol=2e-2)


def test_openreg_amp_autocast_wrapper():
    from torch_openreg.openreg import amp

    a = torch.randn(4, 4, device=DEVICE_TYPE)
    with amp.autocast(dtype=torch.float16):
        assert (a @ a).dtype == torch.float16
    with amp.autocast():
        assert (a @ a).dtype == torch.get_autocast_dtype(DEVICE_TYPE)


def _scaled_step(scaler, model, opt, x):
    from torch_openreg.openreg import amp

    opt.zero_grad()
    with amp.autocast(dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def test_grad_scaler_unscales_before_the_step():
    from torch_openreg.openreg import amp

    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(4, 2)
    model = torch.nn.Linear(4, 2).to(DEVICE_TYPE)
    model.load_state_dict(cpu_model.state_dict())
    x = torch.randn(8, 4)
    scaler = amp.GradScaler(init_scale=2.0**10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _scaled_step(scaler, model, opt, x.to(DEVICE_TYPE))

    # Reference: the same step without scaling, float16 matmul as autocast does.
    ref_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    with torch.autocast("cpu", dtype=torch.float16):
        ref_loss = cpu_model(x).float().pow(2).mean()
    ref_loss.backward()
    ref_opt.step()
    for p, ref in zip(model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), ref.detach(), rtol=1e-2, atol=1e-2)
    assert scaler.get_scale() == 2.0**10


def test_grad_scaler_skips_the_step_on_inf_and_backs_off():
    from torch_openreg.openreg import amp

    model = torch.nn.Linear(4, 2).to(DEVICE_TYPE)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    scaler = amp.GradScaler(init_scale=2.0**10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.full((8, 4), float("inf"), device=DEVICE_TYPE)
    _scaled_step(scaler, model, opt, x)
    for p, old in zip(model.parameters(), before):
        assert torch.equal(p.detach().cpu(), old)
    assert scaler.get_scale() == 2.0**9


# cuDNN's own ops exist only for CUDA; every other op CUDA autocasts from
# ATen's shared lists, openreg does. torch 2.14 registers linalg_matrix_sqrth
# for CUDA outside those lists; it is not mirrored (its policy is not exported).
_NOT_MIRRORED = {"aten::linalg_matrix_sqrth"}


def _cuda_only(op: str) -> bool:
    return "cudnn" in op or "miopen" in op or op in _NOT_MIRRORED


def test_policy_covers_every_op_cuda_autocasts():
    cuda = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA"))
    openreg = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastPrivateUse1"))
    missing = {op for op in cuda - openreg if not _cuda_only(op)}
    assert not missing, f"autocast on CUDA but not on openreg: {sorted(missing)}"
    assert "aten::asin" in openreg and "aten::conv2d" in openreg


@pytest.mark.parametrize("dtype", LOWER)
def test_cuda_policies_apply_on_openreg(dtype):
    x = torch.rand(2, 4, device=DEVICE_TYPE).to(dtype)
    y = torch.rand(2, 4, device=DEVICE_TYPE)  # float32
    with torch.autocast(DEVICE_TYPE, dtype=dtype):
        assert torch.asin(x).dtype == torch.float32  # fp32
        assert torch.nn.functional.layer_norm(x, (4,)).dtype == torch.float32
        assert torch.norm(x).dtype == torch.float32  # fp32_append_dtype
        assert torch.cumsum(x, 0).dtype == torch.float32  # fp32_set_opt_dtype
        assert torch.atan2(x, y).dtype == torch.float32  # promote to the widest
        assert torch.baddbmm(y[None], y[None], torch.eye(4, device=DEVICE_TYPE)[None]).dtype == dtype  # lower_precision_fp
    torch.testing.assert_close(torch.asin(x.float()).cpu(), torch.asin(x.float().cpu()))


def test_binary_cross_entropy_is_banned_under_autocast_as_on_cuda():
    p = torch.rand(3, device=DEVICE_TYPE)
    t = torch.rand(3, device=DEVICE_TYPE)
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, t)
        logits = torch.nn.functional.binary_cross_entropy_with_logits(p, t)
    assert logits.dtype == torch.float32
    # Outside autocast the op is allowed and matches CPU.
    torch.testing.assert_close(torch.nn.functional.binary_cross_entropy(p, t).cpu(),
                               torch.nn.functional.binary_cross_entropy(p.cpu(), t.cpu()))


# The policy kernel reads each op's arguments from its schema (csrc/amp/Autocast.cpp,
# [autocast-policy]); one case per kind of argument and policy branch, each with the dtype
# ATen's typed wrappers give.
@pytest.mark.parametrize("dtype", LOWER)
def test_policy_casts_each_kind_of_argument(dtype):
    x = torch.rand(2, 4, device=DEVICE_TYPE)  # float32
    low = x.to(dtype)
    with torch.autocast(DEVICE_TYPE, dtype=dtype):
        # lower_precision_fp: a present Tensor? (the float32 bias) is cast with the rest,
        # or the matmul would see mixed dtypes.
        assert torch.nn.functional.linear(x, x, x[0, :2]).dtype == dtype
        # lower_precision_fp: every tensor of a Tensor[].
        assert torch.einsum("ij,jk->ik", x, x.t()).dtype == dtype
        assert torch.linalg.multi_dot([x, x.t(), x]).dtype == dtype
        # fp32 with Tensor? arguments present and absent.
        assert torch.nn.functional.layer_norm(low, (4,), low[0], low[0]).dtype == torch.float32
        assert torch.nn.functional.layer_norm(low, (4,)).dtype == torch.float32
        # fp32_set_opt_dtype: an explicit dtype is kept; an ineligible first argument
        # (an integer tensor) leaves the dtype unset.
        assert torch.softmax(low, 0, dtype=torch.float64).dtype == torch.float64
        assert torch.sum(low, dim=[0]).dtype == torch.float32
        ints = torch.arange(4, device=DEVICE_TYPE)
        assert torch.cumsum(ints, 0).dtype == torch.int64
        # promote: the widest of the floating Tensor arguments; double is ignored.
        assert torch.addcmul(low, low, low).dtype == dtype
        assert torch.addcmul(low, x, low).dtype == torch.float32
        assert torch.atan2(low, low.double()).dtype == torch.float64
        # promote with a Tensor?[] (index_put's indices pass through untouched).
        put = torch.index_put(low, (torch.tensor([0, 1], device=DEVICE_TYPE),), x[:, 0:1].t().reshape(2, 1))
        assert put.dtype == torch.float32
    expected = torch.nn.functional.layer_norm(low.cpu().float(), (4,), low[0].cpu().float(), low[0].cpu().float())
    with torch.autocast(DEVICE_TYPE, dtype=dtype):
        got = torch.nn.functional.layer_norm(low, (4,), low[0], low[0])
    torch.testing.assert_close(got.cpu(), expected)
